"""The public API: every client call goes through here, and each is an
adapter over the gateway's workflows (plain Python modules of this package):
unpack the request, scope it to the caller's account (access.py) and its
fences (fencing.py), call the workflow, pack the reply. Errors are domain
errors, which the service's interceptor turns into statuses. The calls on
sessions and on their turns are parts of it in servicer_sessions.py and
servicer_turns.py; here are the wiring, the stream and the workspaces."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.projection.v1 import projection_pb2_grpc as pj_grpc

from services.planmode.client import PlanModeClient
from services.projection.client import ProjectionClient
from services.sessionlog.port import SessionLogPort
from services.workspace.client import WorkspaceClient

from .access import SessionAccess
from .agent_loads import AgentLoads
from .fencing import Fences
from .hub import Connection, Frame, Hub
from .internal_errors import restating_internal_errors
from .kept_plans import KeptPlans
from .opening import DEFAULT_MESSAGE_LIMIT, Projections, SessionOpener
from .plan_choices import PlanChoices
from .runtime_port import RuntimePort
from .runtimes import RuntimeReplicas
from .scope import CallScope
from .servicer_sessions import SessionCalls
from .servicer_turns import TurnCalls
from .session_admin import SessionAdmin
from .stream import StreamFrames

SERVICE_NAME = gw.DESCRIPTOR.services_by_name["GatewayService"].full_name
HEARTBEAT_S = 15.0
Context: TypeAlias = grpc.aio.ServicerContext


def _limit(request: gw.OpenSessionRequest | gw.HistoryPageRequest) -> int:
    return request.message_limit if request.HasField("message_limit") else DEFAULT_MESSAGE_LIMIT


@restating_internal_errors
class GatewayServicer(SessionCalls, TurnCalls, gw_grpc.GatewayServiceServicer):
    def __init__(
        self,
        log: SessionLogPort,
        workspaces: WorkspaceClient,
        runtime: RuntimeReplicas,
        projection: pj_grpc.ProjectionServiceStub,
        plan: PlanModeClient | None,
        heartbeat_s: float = HEARTBEAT_S,
        fences: Fences | None = None,
    ) -> None:
        self.log, self.workspaces = log, workspaces
        self.fences = fences if fences is not None else Fences()
        kept = KeptPlans()
        self.hub = Hub(log, runtime, projection, workspaces, kept)
        self.access = SessionAccess(workspaces, self.hub.set_owner, log)
        self.runtime = RuntimePort(runtime, on_written=kept.acknowledged)
        self.agents = AgentLoads(self.runtime)
        projections = Projections(ProjectionClient.over(projection))
        self.projections = projections.client
        self.opener = SessionOpener(log, projections, self.agents)
        self.plans = PlanChoices(plan, kept, projections.client, self.agents)
        self.stream = StreamFrames(log, self.access, projections, self.hub, heartbeat_s)
        self.admin = SessionAdmin(log, workspaces, self.access, self.runtime, self.hub)
        self.scope = CallScope(self.access, self.fences)

    # -- the stream --------------------------------------------------------------------

    async def Connect(self, request: gw.ConnectRequest, context: Context) -> AsyncIterator[Frame]:
        account = self.scope.account
        await self.fences.connect(account, request.client_id, request.generation)
        with self.hub.attached(Connection(account, request.client_id, request.generation)) as own:
            connected = gw.Connected(client_id=request.client_id, generation=request.generation)
            yield Frame(connected=connected)
            async for frame in self.stream.frames(own, dict(request.cursors)):
                yield frame

    # -- workspaces ---------------------------------------------------------------------

    async def ListWorkspaces(
        self, request: gw.ListWorkspacesRequest, context: Context
    ) -> gw.ListWorkspacesResponse:
        return gw.ListWorkspacesResponse(workspaces=await self.workspaces.list(self.scope.account))

    async def CreateWorkspace(
        self, request: gw.CreateWorkspaceRequest, context: Context
    ) -> gw.CreateWorkspaceResponse:
        workspace, _ = await self.workspaces.create(self.scope.account, request.path)
        return gw.CreateWorkspaceResponse(workspace=workspace)

    async def ConnectWorkspace(
        self, request: gw.ConnectWorkspaceRequest, context: Context
    ) -> gw.ConnectWorkspaceResponse:
        account = self.scope.account
        await self.scope.read(request)
        summary, reused = await self.workspaces.connect(account, request.workspace_id)
        self.admin.joined(account, summary, reused)
        return gw.ConnectWorkspaceResponse(session=summary, reused=reused)

    async def RecentWorkspace(
        self, request: gw.RecentWorkspaceRequest, context: Context
    ) -> gw.RecentWorkspaceResponse:
        return gw.RecentWorkspaceResponse(
            workspace=await self.workspaces.recent(self.scope.account)
        )
