"""The other sessions a command or a permission rule has to know about.

* What a confined command must not see: the stack's own files (fixed at
  start) and every other session's folder, unless it holds or equals the
  command's own folder. Answered from the session log's list of sessions,
  read at most once per `ttl_s` (commands run often; sessions are made
  rarely, and a session made meanwhile is hidden from the next command).
* Which sessions share a workspace: their workspace-scoped permission rules
  apply here too. Answered by the workspace service, which keeps the
  memberships of each account (so one account's rules never reach another's
  session of the same folder); without it, no session shares its rules.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from services.sessionlog.port import SessionLogPort

from .ports import WorkspaceMembersPort

PAGE = 500
TTL_S = 2.0


class Neighbours:
    def __init__(
        self,
        log: SessionLogPort,
        fixed_hidden: Sequence[Path] = (),
        workspaces: WorkspaceMembersPort | None = None,
        ttl_s: float = TTL_S,
    ) -> None:
        self._log = log
        self._workspaces = workspaces
        self._fixed = tuple(fixed_hidden)
        self._ttl_s = ttl_s
        self._cwds: dict[str, str] = {}
        self._read_at = -float("inf")

    async def _sessions(self) -> dict[str, str]:
        """Session id -> cwd of every session (cached for ttl_s)."""
        if time.monotonic() - self._read_at < self._ttl_s:
            return self._cwds
        cwds: dict[str, str] = {}
        token = ""
        while True:
            page, token = await self._log.list_sessions(PAGE, token)
            cwds.update({summary.id: summary.cwd for summary in page})
            if not token:
                break
        self._cwds, self._read_at = cwds, time.monotonic()
        return cwds

    async def hidden_from(self, cwd: Path) -> tuple[Path, ...]:
        """What a command run in `cwd` must not see (cwd as the log has it:
        canonical, symlinks resolved when the session was made)."""
        own = cwd
        others = {Path(c) for c in (await self._sessions()).values() if c}
        foreign = sorted(p for p in others if p != own and p not in own.parents)
        return (*self._fixed, *foreign)

    async def sharing(self, session_id: str, cwd: str) -> list[str]:
        """The other sessions of the session's workspace, when its folder is
        the workspace's (asked only before an approval question)."""
        if self._workspaces is None:
            return []
        path, members = await self._workspaces.workspace_members(session_id)
        return list(members) if path == cwd else []
