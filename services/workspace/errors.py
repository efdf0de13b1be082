"""Errors of the workspace domain, on top of services.common.errors."""

from __future__ import annotations

from services.common.errors import AlreadyExists, InvalidArgument, NotFound, SessionConflict


class WorkspaceNotFound(NotFound):
    """Unknown id, or a workspace of another account: the two are
    indistinguishable on purpose, so an id never leaks another account's data."""

    REASON = "WORKSPACE_NOT_FOUND"

    def __init__(self, workspace_id: str) -> None:
        super().__init__(
            self.REASON, f"workspace {workspace_id!r} not found", workspace_id=workspace_id
        )


# How much of a refused path an answer echoes: a 4 KiB path of control
# characters, quoted, would not fit the 16 KiB a client takes in trailers.
SHOWN_PATH_CHARS = 200


class InvalidWorkspacePath(InvalidArgument):
    """`field` is the request field the path came in (the BadRequest names it)."""

    REASON = "INVALID_WORKSPACE_PATH"

    def __init__(self, path: str, why: str, field: str = "path") -> None:
        shown = path if len(path) <= SHOWN_PATH_CHARS else path[:SHOWN_PATH_CHARS] + "..."
        super().__init__(self.REASON, f"workspace path {shown!r} {why}", path=shown, field=field)


class SessionTaken(SessionConflict):
    """A caller-chosen session id that already names a session we may not
    adopt: a member of another workspace (possibly another account's, with the
    same path) or a session created outside any workspace.

    Same reason as the session log's conflict, so clients handle one case.
    REASON is cleared so the wire registry keeps mapping SESSION_CONFLICT to
    the common class (this subclass adds a message, not a new reason)."""

    REASON = ""

    def __init__(self, session_id: str) -> None:
        # Skip SessionConflict.__init__: its message speaks of a cwd mismatch.
        AlreadyExists.__init__(
            self,
            SessionConflict.REASON,
            f"session id {session_id!r} is already taken",
            session_id=session_id,
        )
