"""gRPC adapter of the workspace domain: requests in, domain calls, replies out."""

from __future__ import annotations

import grpc
from agenthost.workspace.v1 import workspace_pb2 as pb
from agenthost.workspace.v1 import workspace_pb2_grpc as pb_grpc

from .domain import Workspace, Workspaces

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["WorkspaceService"].full_name


def _optional(workspace: Workspace | None) -> pb.Workspace | None:
    return None if workspace is None else workspace.to_proto()


class WorkspaceServicer(pb_grpc.WorkspaceServiceServicer):
    def __init__(self, workspaces: Workspaces) -> None:
        self.workspaces = workspaces

    async def CreateWorkspace(
        self, request: pb.CreateWorkspaceRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateWorkspaceResponse:
        workspace, created = await self.workspaces.create_workspace(
            request.account_id, request.path
        )
        return pb.CreateWorkspaceResponse(workspace=workspace.to_proto(), created=created)

    async def GetWorkspace(
        self, request: pb.GetWorkspaceRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetWorkspaceResponse:
        workspace = await self.workspaces.get_workspace(request.account_id, request.workspace_id)
        return pb.GetWorkspaceResponse(workspace=workspace.to_proto())

    async def ListWorkspaces(
        self, request: pb.ListWorkspacesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListWorkspacesResponse:
        workspaces = await self.workspaces.list_workspaces(request.account_id)
        return pb.ListWorkspacesResponse(workspaces=[w.to_proto() for w in workspaces])

    async def ConnectWorkspace(
        self, request: pb.ConnectWorkspaceRequest, context: grpc.aio.ServicerContext
    ) -> pb.ConnectWorkspaceResponse:
        session, reused = await self.workspaces.connect(request.account_id, request.workspace_id)
        return pb.ConnectWorkspaceResponse(session=session, reused=reused)

    async def CreateWorkspaceSession(
        self, request: pb.CreateWorkspaceSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateWorkspaceSessionResponse:
        session = await self.workspaces.create_session(
            request.account_id, request.workspace_id, request.session_id or None
        )
        return pb.CreateWorkspaceSessionResponse(session=session)

    async def CreateSessionAtPath(
        self, request: pb.CreateSessionAtPathRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateSessionAtPathResponse:
        workspace_id, session = await self.workspaces.create_session_at(
            request.account_id, request.path, request.session_id or None
        )
        return pb.CreateSessionAtPathResponse(session=session, workspace_id=workspace_id)

    async def ArchiveSession(
        self, request: pb.ArchiveSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.ArchiveSessionResponse:
        workspace = await self.workspaces.set_archived(
            request.account_id, request.workspace_id, request.session_id, True
        )
        return pb.ArchiveSessionResponse(workspace=workspace.to_proto())

    async def UnarchiveSession(
        self, request: pb.UnarchiveSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.UnarchiveSessionResponse:
        workspace = await self.workspaces.set_archived(
            request.account_id, request.workspace_id, request.session_id, False
        )
        return pb.UnarchiveSessionResponse(workspace=workspace.to_proto())

    async def AddSession(
        self, request: pb.AddSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.AddSessionResponse:
        workspace = await self.workspaces.add_session(
            request.account_id, request.workspace_id, request.session_id
        )
        return pb.AddSessionResponse(workspace=workspace.to_proto())

    async def RemoveSession(
        self, request: pb.RemoveSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.RemoveSessionResponse:
        await self.workspaces.remove_session(request.account_id, request.session_id)
        return pb.RemoveSessionResponse()

    async def RecentWorkspace(
        self, request: pb.RecentWorkspaceRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecentWorkspaceResponse:
        recent = await self.workspaces.recent(request.account_id)
        return pb.RecentWorkspaceResponse(workspace=_optional(recent))

    async def FindSessionWorkspace(
        self, request: pb.FindSessionWorkspaceRequest, context: grpc.aio.ServicerContext
    ) -> pb.FindSessionWorkspaceResponse:
        found = await self.workspaces.find_session_workspace(request.account_id, request.session_id)
        return pb.FindSessionWorkspaceResponse(workspace=_optional(found))

    async def OwnsSession(
        self, request: pb.OwnsSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.OwnsSessionResponse:
        owned = await self.workspaces.owns_session(request.account_id, request.session_id)
        return pb.OwnsSessionResponse(owned=owned)

    async def ListWorkspaceMembers(
        self, request: pb.ListWorkspaceMembersRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListWorkspaceMembersResponse:
        path, members = await self.workspaces.workspace_members(request.session_id)
        return pb.ListWorkspaceMembersResponse(path=path, session_ids=members)
