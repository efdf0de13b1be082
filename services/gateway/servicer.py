"""The public API: every client call goes through here.

Each call is scoped to the account its bearer token names: another account's
session or workspace answers NOT_FOUND, as if it did not exist. History,
prompt and plan calls resume a cold session through one shared path.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.projection.v1 import projection_pb2 as pj
from agenthost.projection.v1 import projection_pb2_grpc as pj_grpc
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.runtime.v1 import runtime_pb2_grpc as rt_grpc
from google.protobuf.timestamp_pb2 import Timestamp

from services.common.client import call_timeout, domain_errors
from services.common.errors import DomainError, SessionNotFound
from services.planmode.client import PlanModeClient
from services.sessionlog.port import Direction, SessionLogPort, SessionSummary
from services.workspace.client import WorkspaceClient

from .accounts import current_account
from .fencing import Fence, Fences
from .hub import Connection, Frame, Hub
from .plan_cache import PlanCache, PlanView

log = logging.getLogger("agenthost.gateway")

SERVICE_NAME = gw.DESCRIPTOR.services_by_name["GatewayService"].full_name

HEARTBEAT_S = 15.0
# How long OpenSession waits for the projection block and the plan state.
SIDE_READ_TIMEOUT_S = 2.0
# A reconnect whose cursor is further behind than this reopens the session.
MAX_CATCH_UP = 10_000
READ_BATCH = 1000


def _fence(message: gw.RequestFence, present: bool) -> Fence | None:
    if not present:
        return None
    return Fence(message.generation, message.request_id, message.client_id)


def _plan_value(view: PlanView | None) -> gw.PlanModeValue:
    if view is None:
        return gw.PlanModeValue()
    state = pm.PlanModeState(active=view.active)
    if view.pending is not None:
        state.pending = view.pending
    return gw.PlanModeValue(state=state)


class GatewayServicer(gw_grpc.GatewayServiceServicer):
    def __init__(
        self,
        log: SessionLogPort,
        workspaces: WorkspaceClient,
        runtime: rt_grpc.AgentRuntimeServiceStub,
        projection: pj_grpc.ProjectionServiceStub,
        plan: PlanModeClient | None,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.log = log
        self.workspaces = workspaces
        self.runtime = runtime
        self.projection = projection
        self.plan = plan
        self.heartbeat_s = heartbeat_s
        self.fences = Fences()
        self.plans = PlanCache()
        self.hub = Hub(
            log, runtime, workspaces, self.plans, self._refresh_plan if plan is not None else None
        )
        self._access: set[tuple[str, str]] = set()
        self._resuming: dict[str, asyncio.Task[rt.AgentStatus]] = {}

    # -- account scope and the shared resume path ------------------------------------

    async def _own(self, session_id: str) -> str:
        """The caller's account, after checking it owns the session."""
        account = current_account.get()
        if (account, session_id) not in self._access:
            if await self.workspaces.find_session_workspace(account, session_id) is None:
                raise SessionNotFound(session_id)
            self._access.add((account, session_id))
            self.hub.set_owner(session_id, account)
        return account

    async def _resume(self, session_id: str) -> rt.AgentStatus:
        """Load a cold session's agent once, whoever asks first."""
        task = self._resuming.get(session_id)
        if task is None:
            task = asyncio.create_task(self._resume_once(session_id))
            self._resuming[session_id] = task
            task.add_done_callback(lambda _: self._resuming.pop(session_id, None))
        return await asyncio.shield(task)

    async def _resume_once(self, session_id: str) -> rt.AgentStatus:
        reply: rt.ResumeAgentResponse = await domain_errors(
            self.runtime.ResumeAgent(
                rt.ResumeAgentRequest(session_id=session_id),
                timeout=call_timeout(),
                wait_for_ready=True,
            )
        )
        status: rt.AgentStatus = reply.status
        return status

    # -- plan state ------------------------------------------------------------------

    async def _plan_view(self, session_id: str) -> PlanView | None:
        if self.plan is None:
            return None
        cached = self.plans.get(session_id)
        if cached is not None:
            return cached
        await self._resume(session_id)
        await self._refresh_plan(session_id)
        return self.plans.get(session_id)

    async def _refresh_plan(self, session_id: str) -> None:
        assert self.plan is not None
        reply = await self.plan.get(session_id)
        self._adopt(session_id, reply.state, reply.as_of_seq)

    def _adopt(self, session_id: str, state: pm.PlanModeState, as_of_seq: int) -> None:
        pending = state.pending if state.HasField("pending") else None
        changed = self.plans.authoritative(session_id, state.active, pending, as_of_seq)
        owner = self.hub.known_owner(session_id)
        if owner is not None:
            self.hub.announce_plan(owner, session_id, changed)

    # -- the stream --------------------------------------------------------------------

    async def Connect(
        self, request: gw.ConnectRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[gw.ConnectResponse]:
        account = current_account.get()
        self.fences.connect(request.client_id, request.generation)
        connection = Connection(account, request.client_id, request.generation)
        self.hub.attach(connection)
        try:
            yield Frame(
                connected=gw.Connected(client_id=request.client_id, generation=request.generation)
            )
            delivered: dict[str, int] = {}
            for session_id, cursor in sorted(request.cursors.items()):
                async for frame in self._catch_up(session_id, cursor, delivered):
                    yield frame
            async for frame in self._live(connection, delivered):
                yield frame
        finally:
            self.hub.detach(connection)

    async def _catch_up(
        self, session_id: str, cursor: int, delivered: dict[str, int]
    ) -> AsyncIterator[Frame]:
        try:
            await self._own(session_id)
            last_seq = (await self.log.get_session(session_id)).last_seq
        except SessionNotFound:
            yield Frame(resync=gw.Resync(session_id=session_id, reason="unknown session"))
            return
        if cursor > last_seq or last_seq - cursor > MAX_CATCH_UP:
            yield Frame(
                resync=gw.Resync(session_id=session_id, reason="cursor too old or ahead of the log")
            )
            return
        async for frame in self._events_between(session_id, cursor, last_seq + 1):
            yield frame
        delivered[session_id] = last_seq

    async def _events_between(
        self, session_id: str, after: int, before: int
    ) -> AsyncIterator[Frame]:
        """Session events with after < seq < before, read from the log."""
        while after + 1 < before:
            batch = (
                await self.log.read(
                    session_id,
                    from_seq=after + 1,
                    direction=Direction.FORWARD,
                    limit=min(READ_BATCH, before - after - 1),
                )
            ).events
            if not batch:
                return
            for event in batch:
                yield Frame(
                    session_event=gw.SessionEvent(session_id=session_id, seq=event.seq, event=event)
                )
            after = batch[-1].seq

    async def _live(
        self, connection: Connection, delivered: dict[str, int]
    ) -> AsyncIterator[Frame]:
        while True:
            try:
                frame = await asyncio.wait_for(connection.frames.get(), self.heartbeat_s)
            except TimeoutError:
                now = Timestamp()
                now.GetCurrentTime()
                yield Frame(heartbeat=now)
                continue
            if frame is None:
                return
            if frame.HasField("session_event"):
                event = frame.session_event
                seen = delivered.get(event.session_id)
                if seen is not None and event.seq <= seen:
                    continue  # already sent during catch-up
                if seen is not None and event.seq > seen + 1:
                    async for missing in self._events_between(event.session_id, seen, event.seq):
                        yield missing
                delivered[event.session_id] = event.seq
            yield frame

    # -- sessions --------------------------------------------------------------------------

    async def CreateSession(
        self, request: gw.CreateSessionRequest, context: grpc.aio.ServicerContext
    ) -> gw.CreateSessionResponse:
        account = current_account.get()
        fence = _fence(request.fence, request.HasField("fence"))
        if fence is not None:
            self.fences.check_read(fence)
        if request.HasField("workspace_id"):
            workspace_id = request.workspace_id
        else:
            workspace_id = (await self.workspaces.create(account, request.cwd))[0].id
        summary = await self.workspaces.create_session(
            account, workspace_id, request.session_id or None
        )
        self._announce_new(account, summary)
        return gw.CreateSessionResponse(session=summary, seq=summary.last_seq)

    def _announce_new(self, account: str, summary: SessionSummary) -> None:
        self._access.add((account, summary.id))
        self.hub.set_owner(summary.id, account)
        self.hub.broadcast(
            account, Frame(session_added=gw.SessionAdded(summary=summary, blank=summary.blank))
        )

    async def ListSessions(
        self, request: gw.ListSessionsRequest, context: grpc.aio.ServicerContext
    ) -> gw.ListSessionsResponse:
        account = current_account.get()
        if request.workspace_id:
            workspaces = [await self.workspaces.get(account, request.workspace_id)]
        else:
            workspaces = await self.workspaces.list(account)
        ids = [sid for w in workspaces for sid in w.session_ids]
        return gw.ListSessionsResponse(sessions=await self._summaries(ids))

    async def _summaries(self, session_ids: list[str]) -> list[SessionSummary]:
        if not session_ids:
            return []
        durable, _ = await self.log.list_sessions(page_size=1000, session_ids=session_ids)
        listed = {s.id for s in durable}
        lazy = []
        for session_id in session_ids:
            if session_id not in listed:
                try:
                    lazy.append(await self.log.get_session(session_id))
                except SessionNotFound:
                    continue
        return [*durable, *lazy]

    async def OpenSession(
        self, request: gw.OpenSessionRequest, context: grpc.aio.ServicerContext
    ) -> gw.OpenSessionResponse:
        self.fences.check_read(_fence(request.fence, request.HasField("fence")))
        session_id = request.session_id
        await self._own(session_id)
        status = await self._resume(session_id)
        page = await self.log.tail_page(
            session_id,
            message_limit=request.message_limit if request.HasField("message_limit") else 50,
        )
        summary = await self.log.get_session(session_id)
        questions: rt.ListQuestionsResponse = await self.runtime.ListQuestions(
            rt.ListQuestionsRequest(session_id=session_id), timeout=call_timeout()
        )
        reply = gw.OpenSessionResponse(
            session=summary,
            events=page.events,
            has_more=page.has_more,
            before_seq=page.before_seq,
            running=status.running,
            questions=questions.questions,
            seq=page.last_seq,
            projections_seq=-1,
        )
        await self._add_side_reads(session_id, reply)
        return reply

    async def _add_side_reads(self, session_id: str, reply: gw.OpenSessionResponse) -> None:
        """The projection block and the plan state, each bounded in time: when
        one cannot be read now, history is served without it."""
        try:
            projections: pj.GetProjectionResponse = await self.projection.GetProjection(
                pj.GetProjectionRequest(session_id=session_id),
                timeout=call_timeout(SIDE_READ_TIMEOUT_S),
            )
            for key, value in projections.values.items():
                reply.projections[key].CopyFrom(value)
            reply.projections_seq = projections.as_of_seq
        except grpc.aio.AioRpcError as error:
            log.warning("open %s without projections: %s", session_id, error.details())
        try:
            view = await asyncio.wait_for(self._plan_view(session_id), SIDE_READ_TIMEOUT_S)
        except (DomainError, grpc.aio.AioRpcError, TimeoutError) as error:
            reply.plan_error = f"plan state unavailable now: {error}"
            return
        reply.plan.CopyFrom(_plan_value(view))
        reply.plan_seq = view.seq if view else -1

    async def HistoryPage(
        self, request: gw.HistoryPageRequest, context: grpc.aio.ServicerContext
    ) -> gw.HistoryPageResponse:
        await self._own(request.session_id)
        await self._resume(request.session_id)
        page = await self.log.tail_page(
            request.session_id,
            before_seq=request.before_seq,
            message_limit=request.message_limit if request.HasField("message_limit") else 50,
        )
        return gw.HistoryPageResponse(
            events=page.events,
            has_more=page.has_more,
            before_seq=page.before_seq,
            seq=page.last_seq,
        )

    # -- turns and commands ------------------------------------------------------------------

    async def _admit(self, fence_message: gw.RequestFence, session_id: str) -> None:
        """Account scope first (no existence leak), then the fences."""
        await self._own(session_id)
        fence = _fence(fence_message, True)
        assert fence is not None
        self.fences.admit_mutation(fence, session_id)

    async def Prompt(
        self, request: gw.PromptRequest, context: grpc.aio.ServicerContext
    ) -> gw.PromptResponse:
        await self._admit(request.fence, request.session_id)
        await self._resume(request.session_id)
        rollback: bool | None = None
        if request.HasField("plan_target") and self.plan is not None:
            before = await self._plan_view(request.session_id)
            if before is not None:
                rollback = before.pending if before.pending is not None else before.active
            await self._set_plan(request.session_id, request.plan_target)
        try:
            reply: rt.PromptResponse = await domain_errors(
                self.runtime.Prompt(
                    rt.PromptRequest(
                        session_id=request.session_id, text=request.text, mode=request.mode
                    ),
                    timeout=call_timeout(),
                )
            )
        except DomainError:
            if rollback is not None:
                await self._set_plan(request.session_id, rollback)
            raise
        return gw.PromptResponse(
            mode=reply.mode, running=reply.status.running, seq=reply.status.last_seq
        )

    async def Cancel(
        self, request: gw.CancelRequest, context: grpc.aio.ServicerContext
    ) -> gw.CancelResponse:
        await self._admit(request.fence, request.session_id)
        reply: rt.CancelResponse = await domain_errors(
            self.runtime.Cancel(
                rt.CancelRequest(session_id=request.session_id), timeout=call_timeout()
            )
        )
        return gw.CancelResponse(cancelled=reply.cancelled, seq=reply.status.last_seq)

    async def ListCommands(
        self, request: gw.ListCommandsRequest, context: grpc.aio.ServicerContext
    ) -> gw.ListCommandsResponse:
        await self._own(request.session_id)
        reply: rt.ListCommandsResponse = await domain_errors(
            self.runtime.ListCommands(
                rt.ListCommandsRequest(session_id=request.session_id), timeout=call_timeout()
            )
        )
        return gw.ListCommandsResponse(commands=reply.commands)

    async def ExecuteCommand(
        self, request: gw.ExecuteCommandRequest, context: grpc.aio.ServicerContext
    ) -> gw.ExecuteCommandResponse:
        await self._admit(request.fence, request.session_id)
        await self._resume(request.session_id)
        command = rt.ExecuteCommandRequest(session_id=request.session_id, name=request.name)
        if request.HasField("args"):
            command.args = request.args
        reply: rt.ExecuteCommandResponse = await domain_errors(
            self.runtime.ExecuteCommand(command, timeout=call_timeout())
        )
        if self.plan is not None and request.name == "plan":
            await self._refresh_plan(request.session_id)
        return gw.ExecuteCommandResponse(ok=reply.ok, message=reply.message, seq=reply.last_seq)

    async def AnswerQuestion(
        self, request: gw.AnswerQuestionRequest, context: grpc.aio.ServicerContext
    ) -> gw.AnswerQuestionResponse:
        await self._admit(request.fence, request.session_id)
        await domain_errors(
            self.runtime.AnswerQuestion(
                rt.AnswerQuestionRequest(
                    session_id=request.session_id,
                    question_id=request.question_id,
                    answer=request.answer,
                ),
                timeout=call_timeout(),
            )
        )
        last_seq = (await self.log.get_session(request.session_id)).last_seq
        return gw.AnswerQuestionResponse(seq=last_seq)

    # -- plan mode ----------------------------------------------------------------------------

    async def PlanMode(
        self, request: gw.PlanModeRequest, context: grpc.aio.ServicerContext
    ) -> gw.PlanModeResponse:
        self.fences.check_read(_fence(request.fence, request.HasField("fence")))
        await self._own(request.session_id)
        view = await self._plan_view(request.session_id)
        return gw.PlanModeResponse(plan=_plan_value(view), seq=view.seq if view else -1)

    async def SetPlanMode(
        self, request: gw.SetPlanModeRequest, context: grpc.aio.ServicerContext
    ) -> gw.SetPlanModeResponse:
        await self._admit(request.fence, request.session_id)
        if self.plan is None:
            return gw.SetPlanModeResponse(plan=gw.PlanModeValue(), seq=-1)
        await self._resume(request.session_id)
        reply = await self._set_plan(request.session_id, request.active)
        return gw.SetPlanModeResponse(
            plan=gw.PlanModeValue(state=reply.state), outcome=reply.outcome, seq=reply.as_of_seq
        )

    async def _set_plan(self, session_id: str, active: bool) -> pm.SetPlanModeResponse:
        assert self.plan is not None
        reply = await self.plan.set(session_id, active)
        self._adopt(session_id, reply.state, reply.as_of_seq)
        return reply

    # -- workspaces -----------------------------------------------------------------------------

    async def ListWorkspaces(
        self, request: gw.ListWorkspacesRequest, context: grpc.aio.ServicerContext
    ) -> gw.ListWorkspacesResponse:
        return gw.ListWorkspacesResponse(
            workspaces=await self.workspaces.list(current_account.get())
        )

    async def CreateWorkspace(
        self, request: gw.CreateWorkspaceRequest, context: grpc.aio.ServicerContext
    ) -> gw.CreateWorkspaceResponse:
        workspace, _ = await self.workspaces.create(current_account.get(), request.path)
        return gw.CreateWorkspaceResponse(workspace=workspace)

    async def ConnectWorkspace(
        self, request: gw.ConnectWorkspaceRequest, context: grpc.aio.ServicerContext
    ) -> gw.ConnectWorkspaceResponse:
        account = current_account.get()
        self.fences.check_read(_fence(request.fence, request.HasField("fence")))
        summary, reused = await self.workspaces.connect(account, request.workspace_id)
        if not reused:
            self._announce_new(account, summary)
        self._access.add((account, summary.id))
        return gw.ConnectWorkspaceResponse(session=summary, reused=reused)

    async def RecentWorkspace(
        self, request: gw.RecentWorkspaceRequest, context: grpc.aio.ServicerContext
    ) -> gw.RecentWorkspaceResponse:
        workspace = await self.workspaces.recent(current_account.get())
        return (
            gw.RecentWorkspaceResponse(workspace=workspace)
            if workspace
            else gw.RecentWorkspaceResponse()
        )
