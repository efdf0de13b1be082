"""The public API: every client call goes through here.

Each call is scoped to the account its bearer token names: another account's
session or workspace answers NOT_FOUND, as if it did not exist; fences are
per (account, client id) and chosen session ids per account (session_ids),
so nothing one account sends changes or reveals what another gets. History
and prompt calls resume a cold session through one shared path, a plan
choice only when the log shows a turn open (see _set_plan).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.projection.v1 import projection_pb2 as pj
from agenthost.projection.v1 import projection_pb2_grpc as pj_grpc
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev
from agenthost.workspace.v1 import workspace_pb2 as ws
from google.protobuf import json_format, struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from agenthost_core.folds import fork_title
from agenthost_core.plan import PlanState
from services.common.client import call_timeout, peer_call
from services.common.errors import DomainError, InvalidArgument, SessionNotFound
from services.common.recent import Recent
from services.common.tasks import spawn
from services.planmode.client import PlanModeClient
from services.sessionlog.port import Direction, SessionLogPort, SessionSummary, TailPage
from services.workspace.client import WorkspaceClient

from . import listing
from .accounts import current_account
from .fencing import Fence, Fences
from .hub import Connection, Frame, Hub, projection_frame
from .internal_errors import restating_internal_errors
from .kept_plans import KeptPlans
from .runtimes import RuntimeReplicas
from .session_ids import scoped_session_id

log = logging.getLogger("agenthost.gateway")

SERVICE_NAME = gw.DESCRIPTOR.services_by_name["GatewayService"].full_name

HEARTBEAT_S = 15.0
# How long OpenSession waits for the projection block.
SIDE_READ_TIMEOUT_S = 2.0
# The peers this servicer calls through raw stubs (the others through ports).
PROJECTION = "projection"
PLAN_KEY = "plan"
# A reconnect whose cursor is further behind than this reopens the session.
MAX_CATCH_UP = 10_000
READ_BATCH = 1000
# Session ids per list request to the session log (its limit).
LIST_CHUNK = 1000
# (account, session) pairs whose ownership was checked, kept for the recently
# used ones (a forgotten pair is checked again).
ACCESS_KEPT = 10_000

# The projection block, or the error that left a call without it.
BlockRead = tuple[pj.GetProjectionResponse | None, DomainError | grpc.aio.AioRpcError | None]


async def _next_frame(frames: asyncio.Queue[Frame | None], within_s: float) -> Frame | None:
    """The next queued frame, or TimeoutError after `within_s`. Not
    asyncio.wait_for: on Python 3.11 it runs every get as a task of its own
    (a cost per frame per stream, which the fan-out to many streams felt),
    and it can lose a cancel that lands as the frame arrives."""
    if not frames.empty():
        return frames.get_nowait()
    async with asyncio.timeout(within_s):
        return await frames.get()


def _fence(message: gw.RequestFence, present: bool = True) -> Fence | None:
    """The request's fence, scoped by the caller's account."""
    if not present:
        return None
    return Fence(current_account.get(), message.client_id, message.generation, message.request_id)


def _plan_state(value: struct_pb2.Value) -> PlanState:
    """The `plan` projection value (a JSON object) as the plan state."""
    return PlanState.from_view(json_format.MessageToDict(value))


def _plan_value(state: PlanState | None) -> gw.PlanModeValue:
    """The RPC's PlanModeValue (None: no plan mode)."""
    return gw.PlanModeValue() if state is None else gw.PlanModeValue(state=state.to_proto())


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
        self.log = log
        self.workspaces = workspaces
        self.runtime = runtime
        self.projection = projection
        self.plan = plan
        self.heartbeat_s = heartbeat_s
        self.fences = fences if fences is not None else Fences()
        self.plans = KeptPlans()
        self.hub = Hub(log, runtime, projection, workspaces, self.plans)
        self._access: Recent[tuple[str, str], bool] = Recent(ACCESS_KEPT)
        self._resuming: dict[str, asyncio.Task[rt.AgentStatus]] = {}
        # Sessions whose agent this gateway had the runtime load.
        self._loaded: Recent[str, bool] = Recent(ACCESS_KEPT)

    # -- account scope and the shared resume path ------------------------------------

    async def _own(self, session_id: str) -> str:
        """The caller's account, after checking it owns the session."""
        account = current_account.get()
        if not self._access.recall((account, session_id)):
            if await self.workspaces.find_session_workspace(account, session_id) is None:
                raise SessionNotFound(session_id)
            self._access.remember((account, session_id), True)
            self.hub.set_owner(session_id, account)
        return account

    async def _resume(self, session_id: str) -> rt.AgentStatus:
        """Load a cold session's agent once, whoever asks first."""
        task = self._resuming.get(session_id)
        if task is None:
            task = spawn(self._resume_once(session_id), name=f"resume-{session_id}")
            self._resuming[session_id] = task
            task.add_done_callback(lambda _: self._resuming.pop(session_id, None))
        return await asyncio.shield(task)

    async def _resume_unless_loaded(self, session_id: str) -> rt.AgentStatus | None:
        """For a read: load the agent when this gateway has not loaded it yet
        (None: it has). A read needs the load only for a turn a stopped
        runtime left open, and a runtime that starts ends those itself."""
        if self._loaded.recall(session_id):
            return None
        status = await self._resume(session_id)
        self._loaded.remember(session_id, True)
        return status

    async def _resume_once(self, session_id: str) -> rt.AgentStatus:
        reply: rt.ResumeAgentResponse = await self.runtime.call(
            "ResumeAgent", rt.ResumeAgentRequest(session_id=session_id)
        )
        status: rt.AgentStatus = reply.status
        return status

    # -- projections ---------------------------------------------------------------

    async def _projections(
        self,
        session_id: str,
        keys: list[str] | None = None,
        within_s: float | None = None,
        min_seq: int = -1,
    ) -> pj.GetProjectionResponse:
        """`min_seq`: how far the caller read the log (-1: not at all)."""
        request = pj.GetProjectionRequest(session_id=session_id, keys=keys or [])
        if min_seq >= 0:
            request.min_seq = min_seq
        reply: pj.GetProjectionResponse = await peer_call(
            self.projection.GetProjection(
                request,
                timeout=call_timeout(within_s) if within_s else call_timeout(),
                wait_for_ready=True,
            ),
            PROJECTION,
        )
        return reply

    async def _block(self, session_id: str, doing: str, min_seq: int) -> BlockRead:
        """Every projection value, or why there are none now (what is `doing`
        goes on without them)."""
        try:
            block = await self._projections(
                session_id, within_s=SIDE_READ_TIMEOUT_S, min_seq=min_seq
            )
            return block, None
        except (DomainError, grpc.aio.AioRpcError) as error:
            log.warning("%s of %s without projections: %s", doing, session_id, error)
            return None, error

    # -- the stream --------------------------------------------------------------------

    async def Connect(
        self, request: gw.ConnectRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[gw.ConnectResponse]:
        account = current_account.get()
        await self.fences.connect(account, request.client_id, request.generation)
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
        except (SessionNotFound, InvalidArgument):
            # Unknown and another account's read the same; a key the services
            # refuse never ends the stream of the other sessions.
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
        for frame in await self._current_views(session_id, last_seq):
            yield frame

    async def _current_views(self, session_id: str, last_seq: int) -> list[Frame]:
        """What a resuming client may have missed besides events: the
        projection values as of `last_seq` (sent as events) or later (the
        higher seq wins on its side) and the text so far of what runs now."""
        frames = []
        block, _ = await self._block(session_id, "resume", min_seq=last_seq)
        if block is not None:
            frames = [
                projection_frame(session_id, key, value, block.as_of_seq)
                for key, value in sorted(block.values.items())
            ]
        texts, outputs = self.hub.texts.snapshot(session_id)
        frames += [Frame(assistant_delta=text) for text in texts]
        frames += [Frame(tool_output=output) for output in outputs]
        return frames

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
                frame = await _next_frame(connection.frames, self.heartbeat_s)
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
        """A chosen session id is scoped to the account (see session_ids); a
        refused create in a new folder leaves no workspace behind."""
        account = current_account.get()
        await self.fences.check_read(_fence(request.fence, request.HasField("fence")))
        session_id = scoped_session_id(account, request.session_id) if request.session_id else None
        if request.HasField("workspace_id"):
            summary = await self.workspaces.create_session(
                account, request.workspace_id, session_id
            )
        else:
            _, summary = await self.workspaces.create_session_at(account, request.cwd, session_id)
        self._announce_new(account, summary)
        return gw.CreateSessionResponse(session=summary, seq=summary.last_seq)

    def _announce_new(self, account: str, summary: SessionSummary) -> None:
        self._access.remember((account, summary.id), True)
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
        ids = [sid for w in workspaces for sid in (*w.session_ids, *w.archived_session_ids)]
        summaries = {s.id: s for s in await self._summaries(ids)}
        rows = listing.visible(workspaces, summaries, include_archived=request.include_archived)
        size = request.page_size if request.HasField("page_size") else None
        shown, next_token = listing.page(rows, request.page_token, size)
        return gw.ListSessionsResponse(sessions=shown, next_page_token=next_token)

    async def _summaries(self, session_ids: list[str]) -> list[SessionSummary]:
        """The summaries of these sessions (durable ones by pages of the log's
        list, lazy ones one by one); unknown ids are left out."""
        durable: list[SessionSummary] = []
        for start in range(0, len(session_ids), LIST_CHUNK):
            chunk = session_ids[start : start + LIST_CHUNK]
            token = ""
            while True:
                found, token = await self.log.list_sessions(
                    page_size=LIST_CHUNK, page_token=token, session_ids=chunk
                )
                durable += found
                if not token:
                    break
        listed = {s.id for s in durable}
        lazy = []
        for session_id in session_ids:
            if session_id not in listed:
                try:
                    lazy.append(await self.log.get_session(session_id))
                except SessionNotFound:
                    continue
        return [*durable, *lazy]

    async def _summary(self, account: str, session_id: str) -> SessionSummary:
        """One session's summary, with its archived flag."""
        summary = await self.log.get_session(session_id)
        workspace = await self.workspaces.find_session_workspace(account, session_id)
        summary.archived = workspace is not None and session_id in workspace.archived_session_ids
        return summary

    async def RenameSession(
        self, request: gw.RenameSessionRequest, context: grpc.aio.ServicerContext
    ) -> gw.RenameSessionResponse:
        async with self._mutating(request.fence, request.session_id) as account:
            title = ev.Event(session_title=ev.SessionTitle(title=request.title))
            await self.log.append(request.session_id, [title])
            return gw.RenameSessionResponse(
                session=await self._summary(account, request.session_id)
            )

    async def ArchiveSession(
        self, request: gw.ArchiveSessionRequest, context: grpc.aio.ServicerContext
    ) -> gw.ArchiveSessionResponse:
        async with self._mutating(request.fence, request.session_id) as account:
            workspace = await self._workspace_of(account, request.session_id)
            await self.workspaces.archive(
                account, workspace.id, request.session_id, request.archived
            )
            return gw.ArchiveSessionResponse(
                session=await self._summary(account, request.session_id)
            )

    async def ForkSession(
        self, request: gw.ForkSessionRequest, context: grpc.aio.ServicerContext
    ) -> gw.ForkSessionResponse:
        """The fork joins the source's workspace and inherits its log: plan
        state and settings come with it, and its title marked as a fork's
        (a session/title event of the fork's log)."""
        async with self._mutating(request.fence, request.session_id) as account:
            workspace = await self._workspace_of(account, request.session_id)
            up_to = request.up_to_seq if request.HasField("up_to_seq") else None
            fork = await self.log.fork(request.session_id, up_to)
            if fork.title:
                title = ev.Event(session_title=ev.SessionTitle(title=fork_title(fork.title)))
                await self.log.append(fork.id, [title])
                fork = await self.log.get_session(fork.id)
            await self.workspaces.add_session(account, workspace.id, fork.id)
            self._announce_new(account, fork)
            return gw.ForkSessionResponse(session=fork)

    async def DeleteSession(
        self, request: gw.DeleteSessionRequest, context: grpc.aio.ServicerContext
    ) -> gw.DeleteSessionResponse:
        """A running turn is cancelled; the session leaves its workspace first
        (so it is never recreated), then its log goes."""
        async with self._mutating(request.fence, request.session_id) as account:
            await self.runtime.call("Cancel", rt.CancelRequest(session_id=request.session_id))
            await self.workspaces.remove_session(account, request.session_id)
            await self.log.delete_session(request.session_id)
            self._access.pop((account, request.session_id), None)
            return gw.DeleteSessionResponse()

    async def ExportSession(
        self, request: gw.ExportSessionRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[gw.ExportSessionResponse]:
        await self._own(request.session_id)
        after = -1
        while True:
            page = await self.log.read(request.session_id, from_seq=after + 1, limit=READ_BATCH)
            for event in page.events:
                line = json_format.MessageToJson(event, indent=None, sort_keys=True)
                yield gw.ExportSessionResponse(line=line)
            if len(page.events) < READ_BATCH:
                return
            after = page.events[-1].seq

    async def _workspace_of(self, account: str, session_id: str) -> ws.Workspace:
        workspace = await self.workspaces.find_session_workspace(account, session_id)
        if workspace is None:
            raise SessionNotFound(session_id)
        return workspace

    async def OpenSession(
        self, request: gw.OpenSessionRequest, context: grpc.aio.ServicerContext
    ) -> gw.OpenSessionResponse:
        """The tail page and the projection block as of one log position."""
        await self.fences.check_read(_fence(request.fence, request.HasField("fence")))
        session_id = request.session_id
        await self._own(session_id)
        limit = request.message_limit if request.HasField("message_limit") else 50
        # Loading a cold agent may append (the end of a turn left open), so
        # the reads it overlaps are read again when they end before it. The
        # page carries the session's summary (no GetSession of our own).
        status, (page, (block, error)) = await asyncio.gather(
            self._resume_unless_loaded(session_id),
            self._page_and_block(session_id, limit),
        )
        if block is None and status is None:  # `running` from the agent, then
            status = await self._resume(session_id)
        if status is not None and (
            (page.last_seq if block is None else block.as_of_seq) < status.last_seq
        ):
            page, (block, error) = await self._page_and_block(session_id, limit)
        reply = gw.OpenSessionResponse(running=status is not None and status.running)
        if block is None:
            reply.projection_error = f"projections unavailable now: {error}"
        reply.session.CopyFrom(page.session)
        reply.events.extend(page.events)
        reply.has_more, reply.before_seq = page.has_more, page.before_seq
        reply.seq = page.last_seq if block is None else block.as_of_seq
        if block is not None:
            for key, value in block.values.items():
                reply.projections[key].CopyFrom(value)
            if "status" in block.values:
                reply.running = block.values["status"].struct_value.fields["running"].bool_value
        texts, outputs = self.hub.texts.snapshot(session_id)
        reply.live.extend(texts)
        reply.live_output.extend(outputs)
        return reply

    async def _page_and_block(self, session_id: str, limit: int) -> tuple[TailPage, BlockRead]:
        """The tail page and the projection block as of one log position. The
        block is asked as of the page's end, which the projection service's
        feed has mostly folded already (it then reads nothing); when appends
        came in between, the page is read again, cut where the block is."""
        page = await self.log.tail_page(session_id, message_limit=limit)
        block, error = await self._block(session_id, "open", min_seq=page.last_seq)
        if block is not None and block.as_of_seq != page.last_seq:
            page = await self.log.tail_page(
                session_id, before_seq=block.as_of_seq + 1, message_limit=limit
            )
        return page, (block, error)

    async def HistoryPage(
        self, request: gw.HistoryPageRequest, context: grpc.aio.ServicerContext
    ) -> gw.HistoryPageResponse:
        await self._own(request.session_id)
        await self._resume_unless_loaded(request.session_id)
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

    @asynccontextmanager
    async def _mutating(
        self, fence_message: gw.RequestFence, session_id: str
    ) -> AsyncIterator[str]:
        """Account scope first (no existence leak), then the fences; the block
        applies the request (its id stays free when it raises a domain error)."""
        account = await self._own(session_id)
        fence = _fence(fence_message)
        assert fence is not None
        async with self.fences.mutation(fence, session_id):
            yield account

    async def Prompt(
        self, request: gw.PromptRequest, context: grpc.aio.ServicerContext
    ) -> gw.PromptResponse:
        async with self._mutating(request.fence, request.session_id):
            await self._resume(request.session_id)
            rollback: bool | None = None
            if request.HasField("plan_target") and self.plan is not None:
                before = (await self.plan.get(request.session_id)).state
                rollback = before.pending if before.HasField("pending") else before.active
                chosen = await self.plan.set(request.session_id, request.plan_target)
                self.plans.acknowledged(request.session_id, chosen.as_of_seq)
            try:
                reply: rt.PromptResponse = await self.runtime.call(
                    "Prompt",
                    rt.PromptRequest(
                        session_id=request.session_id, text=request.text, mode=request.mode
                    ),
                )
            except DomainError:
                if rollback is not None and self.plan is not None:
                    undone = await self.plan.set(request.session_id, rollback)
                    self.plans.acknowledged(request.session_id, undone.as_of_seq)
                raise
            self.plans.acknowledged(request.session_id, reply.status.last_seq)
            return gw.PromptResponse(
                mode=reply.mode, running=reply.status.running, seq=reply.status.last_seq
            )

    async def Cancel(
        self, request: gw.CancelRequest, context: grpc.aio.ServicerContext
    ) -> gw.CancelResponse:
        async with self._mutating(request.fence, request.session_id):
            reply: rt.CancelResponse = await self.runtime.call(
                "Cancel", rt.CancelRequest(session_id=request.session_id)
            )
            self.plans.acknowledged(request.session_id, reply.status.last_seq)
            return gw.CancelResponse(cancelled=reply.cancelled, seq=reply.status.last_seq)

    async def ListCommands(
        self, request: gw.ListCommandsRequest, context: grpc.aio.ServicerContext
    ) -> gw.ListCommandsResponse:
        await self._own(request.session_id)
        reply: rt.ListCommandsResponse = await self.runtime.call(
            "ListCommands", rt.ListCommandsRequest(session_id=request.session_id)
        )
        return gw.ListCommandsResponse(commands=reply.commands)

    async def ExecuteCommand(
        self, request: gw.ExecuteCommandRequest, context: grpc.aio.ServicerContext
    ) -> gw.ExecuteCommandResponse:
        async with self._mutating(request.fence, request.session_id):
            await self._resume(request.session_id)
            command = rt.ExecuteCommandRequest(session_id=request.session_id, name=request.name)
            if request.HasField("args"):
                command.args = request.args
            reply: rt.ExecuteCommandResponse = await self.runtime.call("ExecuteCommand", command)
            self.plans.acknowledged(request.session_id, reply.last_seq)
            return gw.ExecuteCommandResponse(ok=reply.ok, message=reply.message, seq=reply.last_seq)

    async def AnswerQuestion(
        self, request: gw.AnswerQuestionRequest, context: grpc.aio.ServicerContext
    ) -> gw.AnswerQuestionResponse:
        async with self._mutating(request.fence, request.session_id):
            reply: rt.AnswerQuestionResponse = await self.runtime.call(
                "AnswerQuestion",
                rt.AnswerQuestionRequest(
                    session_id=request.session_id,
                    question_id=request.question_id,
                    answer=request.answer,
                ),
            )
            self.plans.acknowledged(request.session_id, reply.seq)
            return gw.AnswerQuestionResponse(seq=reply.seq)

    async def UpdateSessionSettings(
        self, request: gw.UpdateSessionSettingsRequest, context: grpc.aio.ServicerContext
    ) -> gw.UpdateSessionSettingsResponse:
        async with self._mutating(request.fence, request.session_id):
            update = rt.UpdateSettingsRequest(session_id=request.session_id)
            if request.HasField("sandbox"):
                update.sandbox = request.sandbox
            if request.HasField("approvals"):
                update.approvals = request.approvals
            if request.HasField("model"):
                update.model = request.model
            if request.HasField("network"):
                update.network = request.network
            reply: rt.UpdateSettingsResponse = await self.runtime.call("UpdateSettings", update)
            self.plans.acknowledged(request.session_id, reply.seq)
            return gw.UpdateSessionSettingsResponse(settings=reply.settings, seq=reply.seq)

    async def ListModels(
        self, request: gw.ListModelsRequest, context: grpc.aio.ServicerContext
    ) -> gw.ListModelsResponse:
        await self._own(request.session_id)
        reply: rt.ListModelsResponse = await self.runtime.call(
            "ListModels", rt.ListModelsRequest(session_id=request.session_id)
        )
        return gw.ListModelsResponse(models=reply.models)

    # -- plan mode ----------------------------------------------------------------------------

    async def PlanMode(
        self, request: gw.PlanModeRequest, context: grpc.aio.ServicerContext
    ) -> gw.PlanModeResponse:
        """The `plan` projection value itself, so the two never disagree."""
        await self.fences.check_read(_fence(request.fence, request.HasField("fence")))
        await self._own(request.session_id)
        if self.plan is None:
            return gw.PlanModeResponse(plan=gw.PlanModeValue(), seq=-1)
        session_id = request.session_id
        at_least = request.min_seq if request.HasField("min_seq") else -1
        kept = await self.plans.read_soon(session_id, at_least)
        if kept is not None:
            return gw.PlanModeResponse(plan=_plan_value(kept[0]), seq=kept[1])
        block = await self._projections(
            session_id, [PLAN_KEY], min_seq=self.plans.known_seq(session_id, at_least)
        )
        value = block.values.get(PLAN_KEY)
        state = None if value is None else _plan_state(value)
        if state is not None:
            self.plans.seed(session_id, state, block.as_of_seq)
        return gw.PlanModeResponse(plan=_plan_value(state), seq=block.as_of_seq)

    async def SetPlanMode(
        self, request: gw.SetPlanModeRequest, context: grpc.aio.ServicerContext
    ) -> gw.SetPlanModeResponse:
        async with self._mutating(request.fence, request.session_id):
            if self.plan is None:
                return gw.SetPlanModeResponse(plan=gw.PlanModeValue(), seq=-1)
            reply = await self._set_plan(self.plan, request.session_id, request.active)
            self.plans.acknowledged(request.session_id, reply.as_of_seq)
            return gw.SetPlanModeResponse(
                plan=gw.PlanModeValue(state=reply.state), outcome=reply.outcome, seq=reply.as_of_seq
            )

    async def _set_plan(
        self, plan: PlanModeClient, session_id: str, active: bool
    ) -> pm.SetPlanModeResponse:
        """A choice on an idle agent is one call to plan mode and one append:
        plan mode decides from the log, so the agent is not needed. Only while
        the log shows a turn open is the agent loaded first: the turn may be
        one a stopped runtime left open, which loading ends (the choice then
        commits instead of queueing)."""
        reply = await plan.set(session_id, active, when_idle=True)
        if reply.deferred:
            await self._resume(session_id)
            reply = await plan.set(session_id, active)
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
        await self.fences.check_read(_fence(request.fence, request.HasField("fence")))
        summary, reused = await self.workspaces.connect(account, request.workspace_id)
        if not reused:
            self._announce_new(account, summary)
        self._access.remember((account, summary.id), True)
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
