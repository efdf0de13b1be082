"""The workspace service over gRPC, for the gateway and other callers.

Workspaces come back as the `agenthost.workspace.v1.Workspace` message and
sessions as the session log's `SessionSummary`; failures are the domain
errors the service raised (WorkspaceNotFound, SessionNotFound,
SessionConflict, InvalidWorkspacePath by reason).
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from agenthost.workspace.v1 import workspace_pb2 as pb
from agenthost.workspace.v1 import workspace_pb2_grpc as pb_grpc

from services.common.client import call_timeout, raising_peer_errors
from services.sessionlog.port import SessionSummary

Workspace = pb.Workspace


PEER = "workspace"
calls_peer = raising_peer_errors(PEER)


class WorkspaceClient:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = pb_grpc.WorkspaceServiceStub(channel)

    @calls_peer
    async def create(self, account_id: str, path: str) -> tuple[Workspace, bool]:
        """The account's workspace at `path` (canonicalised), and whether it
        was created by this call."""
        reply: pb.CreateWorkspaceResponse = await self._stub.CreateWorkspace(
            pb.CreateWorkspaceRequest(account_id=account_id, path=path),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply.workspace, reply.created

    @calls_peer
    async def get(self, account_id: str, workspace_id: str) -> Workspace:
        reply: pb.GetWorkspaceResponse = await self._stub.GetWorkspace(
            pb.GetWorkspaceRequest(account_id=account_id, workspace_id=workspace_id),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply.workspace

    @calls_peer
    async def list(self, account_id: str) -> list[Workspace]:
        """In creation order."""
        reply: pb.ListWorkspacesResponse = await self._stub.ListWorkspaces(
            pb.ListWorkspacesRequest(account_id=account_id),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return [*reply.workspaces]

    @calls_peer
    async def connect(self, account_id: str, workspace_id: str) -> tuple[SessionSummary, bool]:
        """The session "New Session" lands in, and whether it was reused."""
        reply: pb.ConnectWorkspaceResponse = await self._stub.ConnectWorkspace(
            pb.ConnectWorkspaceRequest(account_id=account_id, workspace_id=workspace_id),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply.session, reply.reused

    @calls_peer
    async def create_session(
        self, account_id: str, workspace_id: str, session_id: str | None = None
    ) -> SessionSummary:
        """A new session in the workspace (never a reused one)."""
        reply: pb.CreateWorkspaceSessionResponse = await self._stub.CreateWorkspaceSession(
            pb.CreateWorkspaceSessionRequest(
                account_id=account_id, workspace_id=workspace_id, session_id=session_id or ""
            ),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply.session

    @calls_peer
    async def create_session_at(
        self, account_id: str, path: str, session_id: str | None = None
    ) -> tuple[str, SessionSummary]:
        """A new session in the account's workspace at `path` (created when
        absent) and that workspace's id; a refused create leaves no workspace
        behind."""
        reply: pb.CreateSessionAtPathResponse = await self._stub.CreateSessionAtPath(
            pb.CreateSessionAtPathRequest(
                account_id=account_id, path=path, session_id=session_id or ""
            ),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply.workspace_id, reply.session

    @calls_peer
    async def archive(
        self, account_id: str, workspace_id: str, session_id: str, archived: bool = True
    ) -> Workspace:
        """Archive a member (or, with archived=False, bring it back)."""
        if archived:
            reply: (
                pb.ArchiveSessionResponse | pb.UnarchiveSessionResponse
            ) = await self._stub.ArchiveSession(
                pb.ArchiveSessionRequest(
                    account_id=account_id, workspace_id=workspace_id, session_id=session_id
                ),
                timeout=call_timeout(),
                wait_for_ready=True,
            )
        else:
            reply = await self._stub.UnarchiveSession(
                pb.UnarchiveSessionRequest(
                    account_id=account_id, workspace_id=workspace_id, session_id=session_id
                ),
                timeout=call_timeout(),
                wait_for_ready=True,
            )
        return reply.workspace

    @calls_peer
    async def add_session(self, account_id: str, workspace_id: str, session_id: str) -> Workspace:
        reply: pb.AddSessionResponse = await self._stub.AddSession(
            pb.AddSessionRequest(
                account_id=account_id, workspace_id=workspace_id, session_id=session_id
            ),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply.workspace

    @calls_peer
    async def remove_session(self, account_id: str, session_id: str) -> None:
        await self._stub.RemoveSession(
            pb.RemoveSessionRequest(account_id=account_id, session_id=session_id),
            timeout=call_timeout(),
            wait_for_ready=True,
        )

    @calls_peer
    async def recent(self, account_id: str) -> Workspace | None:
        """The workspace the account was active in last; None without any."""
        reply: pb.RecentWorkspaceResponse = await self._stub.RecentWorkspace(
            pb.RecentWorkspaceRequest(account_id=account_id),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply.workspace if reply.HasField("workspace") else None

    @calls_peer
    async def find_session_workspace(self, account_id: str, session_id: str) -> Workspace | None:
        reply: pb.FindSessionWorkspaceResponse = await self._stub.FindSessionWorkspace(
            pb.FindSessionWorkspaceRequest(account_id=account_id, session_id=session_id),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply.workspace if reply.HasField("workspace") else None

    @calls_peer
    async def owns_session(self, account_id: str, session_id: str) -> bool:
        """Whether a workspace of the account holds the session."""
        reply: pb.OwnsSessionResponse = await self._stub.OwnsSession(
            pb.OwnsSessionRequest(account_id=account_id, session_id=session_id),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply.owned

    async def workspace_members(self, session_id: str) -> tuple[str, Sequence[str]]:
        """The path of the workspace holding the session and its other sessions."""
        reply: pb.ListWorkspaceMembersResponse = await self._stub.ListWorkspaceMembers(
            pb.ListWorkspaceMembersRequest(session_id=session_id),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply.path, tuple(reply.session_ids)
