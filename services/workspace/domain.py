"""Workspaces: an account's directories and the sessions grouped under them.

Plain Python over the session-log port and a WorkspaceStore; the gRPC
servicer only converts messages (see `Workspace.to_proto`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from agenthost.workspace.v1 import workspace_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from services.common.errors import SessionConflict, SessionNotFound
from services.common.tasks import spawn
from services.sessionlog.port import SessionLogPort, SessionSummary

from .errors import SessionTaken, WorkspaceNotFound
from .paths import workspace_path
from .store import Membership, WorkspaceRecord, WorkspaceStore

Clock = Callable[[], int]
"""Microseconds since the epoch."""

# The session log accepts at most this many ids per list request.
LIST_IDS_LIMIT = 1000


def now_us() -> int:
    return time.time_ns() // 1000


def generate_workspace_id() -> str:
    return f"w-{uuid.uuid4().hex}"


def generate_session_id() -> str:
    return f"s-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class Workspace:
    id: str
    account_id: str
    path: str
    created_at_us: int
    # Members in the order they joined; every id resolves in the session log.
    session_ids: tuple[str, ...]
    archived_session_ids: tuple[str, ...]

    def to_proto(self) -> workspace_pb2.Workspace:
        created_at = Timestamp()
        created_at.FromMicroseconds(self.created_at_us)
        return workspace_pb2.Workspace(
            id=self.id,
            account_id=self.account_id,
            path=self.path,
            created_at=created_at,
            session_ids=self.session_ids,
            archived_session_ids=self.archived_session_ids,
        )


@dataclass(frozen=True)
class _Loaded:
    """A workspace with the summaries of its active (not archived) members."""

    workspace: Workspace
    active: list[SessionSummary]


class Workspaces:
    """Every operation is scoped by account: another account's workspace is
    reported exactly like an unknown one (WORKSPACE_NOT_FOUND).

    Crash safety of session creation
    --------------------------------
    A session in a workspace takes two writes in two places: a membership row
    here and the session in the session log. They are ordered so that no
    crash between them is visible:

    1. The session id is chosen first (generated, or the caller's) and the
       membership {workspace, session id, cwd = workspace path} is committed
       durably (synchronous=FULL).
    2. Only then is the session created in the log.

    So the log never holds a workspace session without its membership: "a
    session its workspace never shows" cannot happen. The opposite state, a
    membership whose session the log does not know, arises from a crash
    between 1 and 2 and, just as well, from the log's laziness (a session
    never appended to is gone after a session-log restart). Both are the same
    thing: a blank session that is not materialised. Whenever members are
    resolved (every read that returns them, and ConnectWorkspace) a member the
    log does not know is created again with the same id and cwd; creation is
    idempotent for the same id and cwd, so concurrent repairs agree. Members
    therefore always resolve, and a repaired member is blank, so
    ConnectWorkspace reuses it.

    A member whose id the log gives to a session with another cwd was never
    ours (the log refused our create with a conflict and we died before
    removing the row): it is dropped, never shown.

    Residual, documented risk: a caller-chosen session id that someone else
    creates in the log with the same cwd between our existence check and
    step 2 is adopted. Generated ids cannot collide.
    """

    def __init__(self, log: SessionLogPort, store: WorkspaceStore, clock: Clock = now_us) -> None:
        self._log = log
        self._store = store
        self._clock = clock
        # One ConnectWorkspace attempt in flight per workspace id.
        self._connecting: dict[str, asyncio.Task[tuple[SessionSummary, bool]]] = {}

    # -- workspaces ------------------------------------------------------------

    async def create_workspace(self, account_id: str, path: str) -> tuple[Workspace, bool]:
        """The account's workspace at `path` (canonicalised), created when
        absent; the bool says whether it was created. `path` must name an
        existing directory other than `/` (INVALID_WORKSPACE_PATH)."""
        record = WorkspaceRecord(
            generate_workspace_id(), account_id, workspace_path(path), self._clock()
        )
        stored, created = await self._store.add_workspace(record)
        return (await self._load([stored]))[0].workspace, created

    async def get_workspace(self, account_id: str, workspace_id: str) -> Workspace:
        record = await self._owned(account_id, workspace_id)
        return (await self._load([record]))[0].workspace

    async def list_workspaces(self, account_id: str) -> list[Workspace]:
        """In creation order."""
        records = await self._store.list_workspaces(account_id)
        return [loaded.workspace for loaded in await self._load(records)]

    async def recent(self, account_id: str) -> Workspace | None:
        """The workspace where the account was active last: the latest
        `updated_at` of its active sessions, or its own `created_at` when it
        has none. Ties go to the earlier workspace in list order; None when
        the account has no workspace. Archived sessions do not count: they
        are out of sight and should not steer "New Session"."""
        best: Workspace | None = None
        best_at = 0
        for loaded in await self._load(await self._store.list_workspaces(account_id)):
            active_at = _last_activity_us(loaded)
            # Strictly later only: a tie keeps the earlier workspace.
            if best is None or active_at > best_at:
                best, best_at = loaded.workspace, active_at
        return best

    async def find_session_workspace(self, account_id: str, session_id: str) -> Workspace | None:
        """The account's workspace holding the session (archived or not)."""
        found = await self._account_membership(account_id, session_id)
        if found is None:
            return None
        workspace = (await self._load([found[1]]))[0].workspace
        # Resolution may have dropped a membership that was never ours.
        members = workspace.session_ids + workspace.archived_session_ids
        return workspace if session_id in members else None

    async def owns_session(self, account_id: str, session_id: str) -> bool:
        """Whether a workspace of the account holds the session (archived or
        not): find_session_workspace's answer, resolving this session's
        membership only, not every member of its workspace."""
        found = await self._account_membership(account_id, session_id)
        return found is not None and session_id in await self._resolve([found[0]])

    async def _account_membership(
        self, account_id: str, session_id: str
    ) -> tuple[Membership, WorkspaceRecord] | None:
        """The session's membership and workspace, when the account's."""
        membership = await self._store.get_membership(session_id)
        if membership is None:
            return None
        record = await self._store.get_workspace(membership.workspace_id)
        if record is None or record.account_id != account_id:
            return None
        return membership, record

    # -- sessions ----------------------------------------------------------------

    async def connect(self, account_id: str, workspace_id: str) -> tuple[SessionSummary, bool]:
        """The session "New Session" lands in, and whether it was reused.

        Reuses a member that is blank, has cwd == workspace path and is not
        archived (the most recently joined when several qualify); otherwise
        creates one. A session with the right cwd that is not a member is
        never reused. Concurrent calls for one workspace share one attempt,
        and so one result (`reused` included). The sharing is per process:
        replicas racing may each create a blank, which later connects reuse."""
        record = await self._owned(account_id, workspace_id)
        attempt = self._connecting.get(record.id)
        if attempt is None or attempt.done():
            attempt = spawn(self._connect_once(record), name=f"connect-{record.id}")
            self._connecting[record.id] = attempt
            attempt.add_done_callback(lambda done: self._forget_attempt(record.id, done))
        # Shielded: a caller that goes away must not cancel the others' attempt.
        return await asyncio.shield(attempt)

    async def create_session(
        self, account_id: str, workspace_id: str, session_id: str | None = None
    ) -> SessionSummary:
        """A new session in the workspace, never a reused one. Retrying with
        the same caller-chosen id returns the same session; an id already used
        anywhere else fails with SESSION_CONFLICT."""
        record = await self._owned(account_id, workspace_id)
        if session_id is None:
            return await self._new_member(record, generate_session_id())
        existing = await self._store.get_membership(session_id)
        if existing is not None:
            return await self._retried_member(record, existing)
        # Never adopt a session created outside this workspace (a CLI session
        # in the same directory, say): it would belong to whoever guessed its id.
        if await self._log_knows(session_id):
            raise SessionTaken(session_id)
        return await self._new_member(record, session_id)

    async def create_session_at(
        self, account_id: str, path: str, session_id: str | None = None
    ) -> tuple[str, SessionSummary]:
        """A new session in the account's workspace at `path`, the workspace
        created when absent; returns the workspace id and the session.

        A refused create leaves no workspace behind: a caller-chosen id is
        checked before anything is written, and a workspace this call made
        is taken back if the id is lost to a racing create after the check
        (only while it has no member: a concurrent CreateWorkspace of the
        same path in that instant is the one residual case)."""
        canonical = workspace_path(path)
        if session_id is not None:
            retried = await self._retried_at(account_id, canonical, session_id)
            if retried is not None:
                return retried
            if await self._log_knows(session_id):
                raise SessionTaken(session_id)
        record = WorkspaceRecord(generate_workspace_id(), account_id, canonical, self._clock())
        stored, created = await self._store.add_workspace(record)
        try:
            summary = await self.create_session(account_id, stored.id, session_id)
        except SessionConflict:
            if created:
                await self._store.remove_workspace_if_empty(stored.id)
            raise
        return stored.id, summary

    async def _retried_at(
        self, account_id: str, path: str, session_id: str
    ) -> tuple[str, SessionSummary] | None:
        """The session again when `session_id` is already the account's
        member at `path` (a retry); None when the id is free; SessionTaken
        when it is a member anywhere else."""
        membership = await self._store.get_membership(session_id)
        if membership is None:
            return None
        record = await self._store.get_workspace(membership.workspace_id)
        if record is None or record.account_id != account_id or record.path != path:
            raise SessionTaken(session_id)
        return record.id, await self._retried_member(record, membership)

    async def set_archived(
        self, account_id: str, workspace_id: str, session_id: str, archived: bool = True
    ) -> Workspace:
        """Moves a member to the archived list or back; twice is harmless."""
        record = await self._owned(account_id, workspace_id)
        membership = await self._store.get_membership(session_id)
        if membership is None or membership.workspace_id != record.id:
            raise SessionNotFound(session_id)
        await self._store.set_archived(session_id, archived)
        return (await self._load([record]))[0].workspace

    async def add_session(self, account_id: str, workspace_id: str, session_id: str) -> Workspace:
        """An existing session (a fork) joins the workspace; joining again is
        harmless, a member of another workspace is SESSION_TAKEN."""
        record = await self._owned(account_id, workspace_id)
        summary = await self._log.get_session(session_id)
        membership = Membership(record.id, session_id, summary.cwd, False, self._clock())
        stored, _ = await self._store.add_membership(membership)
        if stored.workspace_id != record.id:
            raise SessionTaken(session_id)
        return (await self._load([record]))[0].workspace

    async def remove_session(self, account_id: str, session_id: str) -> None:
        """The session leaves the account's workspace; unknown is harmless."""
        if await self.owns_session(account_id, session_id):
            await self._store.remove_membership(session_id)

    async def workspace_members(self, session_id: str) -> tuple[str, list[str]]:
        """The path of the workspace holding the session and its other
        sessions (one account's, by construction); ("", []) when none."""
        membership = await self._store.get_membership(session_id)
        if membership is None:
            return "", []
        record = await self._store.get_workspace(membership.workspace_id)
        if record is None:
            return "", []
        workspace = (await self._load([record]))[0].workspace
        members = [*workspace.session_ids, *workspace.archived_session_ids]
        if session_id not in members:
            return "", []
        return workspace.path, [member for member in members if member != session_id]

    # -- internals -----------------------------------------------------------------

    async def _owned(self, account_id: str, workspace_id: str) -> WorkspaceRecord:
        record = await self._store.get_workspace(workspace_id)
        if record is None or record.account_id != account_id:
            raise WorkspaceNotFound(workspace_id)
        return record

    def _forget_attempt(
        self, workspace_id: str, done: asyncio.Task[tuple[SessionSummary, bool]]
    ) -> None:
        if self._connecting.get(workspace_id) is done:
            del self._connecting[workspace_id]
        if not done.cancelled():
            done.exception()  # retrieved: every waiter may have gone away

    async def _connect_once(self, record: WorkspaceRecord) -> tuple[SessionSummary, bool]:
        members = await self._store.list_memberships([record.id])
        active = [m for m in members if not m.archived]
        resolved = await self._resolve(active)
        reusable = [
            resolved[m.session_id]
            for m in active
            if m.session_id in resolved and _reusable(resolved[m.session_id], record)
        ]
        if reusable:
            return reusable[-1], True  # members are in join order: the newest
        return await self._new_member(record, generate_session_id()), False

    async def _new_member(self, record: WorkspaceRecord, session_id: str) -> SessionSummary:
        """Membership first, then the log (see the class docstring)."""
        membership = Membership(record.id, session_id, record.path, False, self._clock())
        stored, added = await self._store.add_membership(membership)
        if stored.workspace_id != record.id:
            raise SessionTaken(session_id)
        try:
            summary, _ = await self._log.create_session(session_id, record.path)
        except SessionConflict:
            if added:
                await self._store.remove_membership(session_id)
            raise SessionTaken(session_id) from None
        return summary

    async def _retried_member(
        self, record: WorkspaceRecord, membership: Membership
    ) -> SessionSummary:
        if membership.workspace_id != record.id:
            raise SessionTaken(membership.session_id)
        summary = (await self._resolve([membership])).get(membership.session_id)
        if summary is None:
            raise SessionTaken(membership.session_id)
        return summary

    async def _log_knows(self, session_id: str) -> bool:
        try:
            await self._log.get_session(session_id)
        except SessionNotFound:
            return False
        return True

    async def _load(self, records: Sequence[WorkspaceRecord]) -> list[_Loaded]:
        """The workspaces with their resolved members, in the given order."""
        members = await self._store.list_memberships([r.id for r in records])
        resolved = await self._resolve(members)
        by_workspace: dict[str, list[Membership]] = {r.id: [] for r in records}
        for member in members:
            if member.session_id in resolved:
                by_workspace[member.workspace_id].append(member)
        return [_loaded(r, by_workspace[r.id], resolved) for r in records]

    async def _resolve(self, members: Sequence[Membership]) -> dict[str, SessionSummary]:
        """Summaries of `members` by session id, repairing as the class
        docstring says: members unknown to the log are created again, members
        the log gives another cwd are dropped (and absent from the result)."""
        listed = await self._listed(m.session_id for m in members)
        unlisted = [m for m in members if m.session_id not in listed]
        # Lazy members are unlisted in normal operation too (about one blank
        # per workspace), so their idempotent re-creates run concurrently.
        recreated = await asyncio.gather(*(self._recreate(m) for m in unlisted))
        found = listed | {
            m.session_id: s for m, s in zip(unlisted, recreated, strict=True) if s is not None
        }
        resolved: dict[str, SessionSummary] = {}
        for member in members:
            summary = found.get(member.session_id)
            if summary is None or summary.cwd != member.cwd:
                await self._store.remove_membership(member.session_id)
                continue
            resolved[member.session_id] = summary
        return resolved

    async def _listed(self, session_ids: Iterable[str]) -> dict[str, SessionSummary]:
        """The durable sessions among `session_ids` (the log does not list
        never-appended ones)."""
        ids = list(session_ids)
        found: dict[str, SessionSummary] = {}
        # An empty id filter would list every session: only ask with ids.
        for start in range(0, len(ids), LIST_IDS_LIMIT):
            chunk = ids[start : start + LIST_IDS_LIMIT]
            token = ""
            while True:
                page, token = await self._log.list_sessions(
                    page_size=len(chunk), page_token=token, session_ids=chunk
                )
                found.update((s.id, s) for s in page)
                if not token:
                    break
        return found

    async def _recreate(self, member: Membership) -> SessionSummary | None:
        """The member's session, created again when the log lost or never got
        it; still-lazy sessions come back as they are (create is idempotent)."""
        try:
            summary, _ = await self._log.create_session(member.session_id, member.cwd)
        except SessionConflict:
            return None
        return summary


def _loaded(
    record: WorkspaceRecord, members: Sequence[Membership], resolved: dict[str, SessionSummary]
) -> _Loaded:
    active = [m.session_id for m in members if not m.archived]
    workspace = Workspace(
        id=record.id,
        account_id=record.account_id,
        path=record.path,
        created_at_us=record.created_at_us,
        session_ids=tuple(active),
        archived_session_ids=tuple(m.session_id for m in members if m.archived),
    )
    return _Loaded(workspace, [resolved[i] for i in active])


def _reusable(summary: SessionSummary, record: WorkspaceRecord) -> bool:
    return summary.blank and summary.cwd == record.path


def _last_activity_us(loaded: _Loaded) -> int:
    if not loaded.active:
        return loaded.workspace.created_at_us
    return max(s.updated_at.ToMicroseconds() for s in loaded.active)
