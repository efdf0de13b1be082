"""Which account may touch which session, checked once and remembered.

Every call is scoped to the account its bearer token names: another
account's session answers NOT_FOUND, as if it did not exist. The check asks
the workspace service which workspace of the account holds the session; a
pair found once is remembered (the recently used ones), and the hub learns
the session's owner so it relays its frames to that account only.

A subagent's session (a child: its log starts with subagent/header) is no
workspace's member: it belongs to whoever owns its parent."""

from __future__ import annotations

from collections.abc import Callable

from agenthost.workspace.v1 import workspace_pb2 as ws

from services.common.errors import SessionNotFound
from services.common.recent import Recent
from services.sessionlog.port import SessionLogPort
from services.workspace.client import WorkspaceClient

# (account, session) pairs whose ownership was checked, kept for the recently
# used ones (a forgotten pair is checked again).
ACCESS_KEPT = 10_000

OwnerKnown = Callable[[str, str], None]


class SessionAccess:
    def __init__(
        self, workspaces: WorkspaceClient, owner_known: OwnerKnown, log: SessionLogPort
    ) -> None:
        self._workspaces = workspaces
        self._owner_known = owner_known
        self._log = log
        self._checked: Recent[tuple[str, str], bool] = Recent(ACCESS_KEPT)

    async def check(self, account: str, session_id: str) -> None:
        """SessionNotFound unless `account` owns the session."""
        if not self._checked.recall((account, session_id)):
            if not await self._workspaces.owns_session(account, session_id):
                parent = await self._parent_of(session_id)
                if not parent:
                    raise SessionNotFound(session_id)
                await self.check(account, parent)
            self.granted(account, session_id)

    async def _parent_of(self, session_id: str) -> str:
        """The parent a subagent's session names in its header ("": none)."""
        try:
            first = (await self._log.read(session_id, from_seq=0, limit=1)).events
        except SessionNotFound:
            return ""
        if not first or not first[0].HasField("subagent_header"):
            return ""
        return first[0].subagent_header.parent_session_id

    def granted(self, account: str, session_id: str) -> None:
        """The account owns the session (it just made it, say)."""
        self._checked.remember((account, session_id), True)
        self._owner_known(session_id, account)

    def revoked(self, account: str, session_id: str) -> None:
        self._checked.pop((account, session_id), None)

    async def workspace_of(self, account: str, session_id: str) -> ws.Workspace:
        workspace = await self._workspaces.find_session_workspace(account, session_id)
        if workspace is None:
            raise SessionNotFound(session_id)
        return workspace
