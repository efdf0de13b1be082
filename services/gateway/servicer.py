"""The public API: every client call goes through here, and each is an
adapter over the gateway's workflows (plain Python modules of this package):
unpack the request, scope it to the caller's account (access.py) and its
fences (fencing.py), call the workflow, pack the reply. Errors are domain
errors, which the service's interceptor turns into statuses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.projection.v1 import projection_pb2_grpc as pj_grpc
from agenthost.runtime.v1 import runtime_pb2 as rt

from services.planmode.client import PlanModeClient
from services.projection.client import ProjectionClient
from services.sessionlog.port import SessionLogPort
from services.workspace.client import WorkspaceClient

from . import listing
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
from .session_admin import SessionAdmin
from .stream import StreamFrames

SERVICE_NAME = gw.DESCRIPTOR.services_by_name["GatewayService"].full_name
HEARTBEAT_S = 15.0
Context: TypeAlias = grpc.aio.ServicerContext


def _limit(request: gw.OpenSessionRequest | gw.HistoryPageRequest) -> int:
    return request.message_limit if request.HasField("message_limit") else DEFAULT_MESSAGE_LIMIT


@restating_internal_errors
class GatewayServicer(gw_grpc.GatewayServiceServicer):
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
        self.access = SessionAccess(workspaces, self.hub.set_owner)
        self.runtime = RuntimePort(runtime, on_written=kept.acknowledged)
        self.agents = AgentLoads(self.runtime)
        projections = Projections(ProjectionClient.over(projection))
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

    # -- sessions ----------------------------------------------------------------------

    async def CreateSession(
        self, request: gw.CreateSessionRequest, context: Context
    ) -> gw.CreateSessionResponse:
        await self.scope.read(request)
        workspace_id = request.workspace_id if request.HasField("workspace_id") else None
        summary = await self.admin.create(
            self.scope.account, workspace_id, request.cwd, request.session_id
        )
        return gw.CreateSessionResponse(session=summary, seq=summary.last_seq)

    async def ListSessions(
        self, request: gw.ListSessionsRequest, context: Context
    ) -> gw.ListSessionsResponse:
        account = self.scope.account
        if request.workspace_id:
            workspaces = [await self.workspaces.get(account, request.workspace_id)]
        else:
            workspaces = await self.workspaces.list(account)
        ids = [sid for w in workspaces for sid in (*w.session_ids, *w.archived_session_ids)]
        summaries = {s.id: s for s in await listing.summaries(self.log, ids)}
        rows = listing.visible(workspaces, summaries, include_archived=request.include_archived)
        size = request.page_size if request.HasField("page_size") else None
        shown, next_token = listing.page(rows, request.page_token, size)
        return gw.ListSessionsResponse(sessions=shown, next_page_token=next_token)

    async def RenameSession(
        self, request: gw.RenameSessionRequest, context: Context
    ) -> gw.RenameSessionResponse:
        async with self.scope.mutating(request.fence, request.session_id) as account:
            summary = await self.admin.rename(account, request.session_id, request.title)
            return gw.RenameSessionResponse(session=summary)

    async def ArchiveSession(
        self, request: gw.ArchiveSessionRequest, context: Context
    ) -> gw.ArchiveSessionResponse:
        async with self.scope.mutating(request.fence, request.session_id) as account:
            summary = await self.admin.archive(account, request.session_id, request.archived)
            return gw.ArchiveSessionResponse(session=summary)

    async def ForkSession(
        self, request: gw.ForkSessionRequest, context: Context
    ) -> gw.ForkSessionResponse:
        async with self.scope.mutating(request.fence, request.session_id) as account:
            up_to = request.up_to_seq if request.HasField("up_to_seq") else None
            return gw.ForkSessionResponse(
                session=await self.admin.fork(account, request.session_id, up_to)
            )

    async def DeleteSession(
        self, request: gw.DeleteSessionRequest, context: Context
    ) -> gw.DeleteSessionResponse:
        async with self.scope.mutating(request.fence, request.session_id) as account:
            await self.admin.delete(account, request.session_id)
            return gw.DeleteSessionResponse()

    async def ExportSession(
        self, request: gw.ExportSessionRequest, context: Context
    ) -> AsyncIterator[gw.ExportSessionResponse]:
        await self.scope.own(request.session_id)
        async for line in self.admin.export(request.session_id):
            yield gw.ExportSessionResponse(line=line)

    async def OpenSession(
        self, request: gw.OpenSessionRequest, context: Context
    ) -> gw.OpenSessionResponse:
        """The tail page and the projection block as of one log position."""
        await self.scope.read(request)
        await self.scope.own(request.session_id)
        opened = await self.opener.open(request.session_id, _limit(request))
        page, block = opened.page, opened.block
        reply = gw.OpenSessionResponse(
            running=opened.running,
            session=page.session,
            events=page.events,
            has_more=page.has_more,
            before_seq=page.before_seq,
            seq=opened.seq,
            projections=block.values if block is not None else {},
        )
        if block is None:
            reply.projection_error = f"projections unavailable now: {opened.block_error}"
        texts, outputs = self.hub.texts.snapshot(request.session_id)
        reply.live.extend(texts)
        reply.live_output.extend(outputs)
        return reply

    async def HistoryPage(
        self, request: gw.HistoryPageRequest, context: Context
    ) -> gw.HistoryPageResponse:
        await self.scope.own(request.session_id)
        await self.agents.load_for_read(request.session_id)
        page = await self.log.tail_page(
            request.session_id, before_seq=request.before_seq, message_limit=_limit(request)
        )
        return gw.HistoryPageResponse(
            events=page.events,
            has_more=page.has_more,
            before_seq=page.before_seq,
            seq=page.last_seq,
        )

    # -- turns, commands, questions, settings -------------------------------------------

    async def Prompt(self, request: gw.PromptRequest, context: Context) -> gw.PromptResponse:
        async with self.scope.mutating(request.fence, request.session_id):
            session_id = request.session_id
            await self.agents.load(session_id)
            target = request.plan_target if request.HasField("plan_target") else None
            reply = await self.plans.with_target(
                session_id,
                target,
                lambda: self.runtime.prompt(
                    session_id, request.text, request.mode, request.resources
                ),
            )
            status = reply.status
            return gw.PromptResponse(mode=reply.mode, running=status.running, seq=status.last_seq)

    async def Cancel(self, request: gw.CancelRequest, context: Context) -> gw.CancelResponse:
        async with self.scope.mutating(request.fence, request.session_id):
            reply = await self.runtime.cancel(request.session_id)
            return gw.CancelResponse(cancelled=reply.cancelled, seq=reply.status.last_seq)

    async def ListCommands(
        self, request: gw.ListCommandsRequest, context: Context
    ) -> gw.ListCommandsResponse:
        await self.scope.own(request.session_id)
        commands = await self.runtime.list_commands(request.session_id)
        return gw.ListCommandsResponse(commands=commands)

    async def ExecuteCommand(
        self, request: gw.ExecuteCommandRequest, context: Context
    ) -> gw.ExecuteCommandResponse:
        async with self.scope.mutating(request.fence, request.session_id):
            await self.agents.load(request.session_id)
            args = request.args if request.HasField("args") else None
            reply = await self.runtime.execute_command(request.session_id, request.name, args)
            return gw.ExecuteCommandResponse(ok=reply.ok, message=reply.message, seq=reply.last_seq)

    async def AnswerQuestion(
        self, request: gw.AnswerQuestionRequest, context: Context
    ) -> gw.AnswerQuestionResponse:
        async with self.scope.mutating(request.fence, request.session_id):
            seq = await self.runtime.answer(request.session_id, request.question_id, request.answer)
            return gw.AnswerQuestionResponse(seq=seq)

    async def UpdateSessionSettings(
        self, request: gw.UpdateSessionSettingsRequest, context: Context
    ) -> gw.UpdateSessionSettingsResponse:
        async with self.scope.mutating(request.fence, request.session_id):
            update = rt.UpdateSettingsRequest(session_id=request.session_id)
            for name in ("sandbox", "approvals", "model", "network"):
                if request.HasField(name):
                    setattr(update, name, getattr(request, name))
            reply = await self.runtime.update_settings(update)
            return gw.UpdateSessionSettingsResponse(settings=reply.settings, seq=reply.seq)

    async def ListModels(
        self, request: gw.ListModelsRequest, context: Context
    ) -> gw.ListModelsResponse:
        await self.scope.own(request.session_id)
        return gw.ListModelsResponse(models=await self.runtime.list_models(request.session_id))

    async def ListPaths(
        self, request: gw.ListPathsRequest, context: Context
    ) -> gw.ListPathsResponse:
        """What `@` completes: the runtime lists the session's folder as its
        file tools see it (confined, hidden paths left out)."""
        await self.scope.own(request.session_id)
        reply = await self.runtime.list_paths(request.session_id, request.prefix, request.limit)
        return gw.ListPathsResponse(entries=reply.entries, truncated=reply.truncated)

    # -- plan mode ----------------------------------------------------------------------

    async def PlanMode(self, request: gw.PlanModeRequest, context: Context) -> gw.PlanModeResponse:
        """The `plan` projection value itself, so the two never disagree."""
        await self.scope.read(request)
        await self.scope.own(request.session_id)
        at_least = request.min_seq if request.HasField("min_seq") else -1
        state, seq = await self.plans.read(request.session_id, at_least)
        plan = gw.PlanModeValue() if state is None else gw.PlanModeValue(state=state.to_proto())
        return gw.PlanModeResponse(plan=plan, seq=seq)

    async def SetPlanMode(
        self, request: gw.SetPlanModeRequest, context: Context
    ) -> gw.SetPlanModeResponse:
        async with self.scope.mutating(request.fence, request.session_id):
            reply = await self.plans.choose(request.session_id, request.active)
            if reply is None:
                return gw.SetPlanModeResponse(plan=gw.PlanModeValue(), seq=-1)
            plan = gw.PlanModeValue(state=reply.state)
            return gw.SetPlanModeResponse(plan=plan, outcome=reply.outcome, seq=reply.as_of_seq)

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
