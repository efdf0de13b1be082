"""The client's connection to the gateway: one `Connect` stream, unary calls,
reconnects with a bounded exponential backoff.

A stream the gateway confirmed and then lost makes a new, larger generation
at once (attempts that never connect keep it); every request carries a
RequestFence (client id, generation, a monotonic request id). On reconnect
the client presents, per open session, the last seq it holds, so the gateway
sends what was missed and then live frames; a `resync` frame makes that
session reopen. Frames are routed to the open `Session` objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import session_log_pb2 as sl
from agenthost.workspace.v1 import workspace_pb2 as ws
from google.protobuf.message import Message

from .auth import authorized_channel
from .errors import (
    AgentHostError,
    ClientClosedError,
    StaleRequestError,
    SupersededError,
    TransportError,
    UnauthenticatedError,
    error_from_rpc,
)
from .feed import SessionFeed
from .models import ModelInfo, model_info
from .plan import PlanValue
from .session import Session
from .sessions import SessionList
from .validation import outcome_name, plan_value

log = logging.getLogger("agenthost.sdk")

Frame = gw.ConnectResponse
FrameListener = Callable[[Frame], None]

DEFAULT_CALL_TIMEOUT_S = 10.0
# The gateway sends a heartbeat every 15 s by default: silence this long means
# the stream is dead even if TCP has not noticed.
DEFAULT_IDLE_TIMEOUT_S = 60.0
DEFAULT_MESSAGE_LIMIT = 200
# Frames held for sessions not opened yet: per session, and sessions held.
EARLY_FRAMES_KEPT = 1000
EARLY_SESSIONS_KEPT = 64


@dataclass(frozen=True)
class Backoff:
    """Delay before reconnect attempt n (0-based): initial * factor**n, capped
    at `max_s`, spread by ±`jitter`. When `max_attempts` reconnect attempts in
    a row (after the attempt that lost or never got the stream) fail, the
    client stops with a TransportError (None: it keeps trying)."""

    initial_s: float = 0.05
    factor: float = 2.0
    max_s: float = 2.0
    jitter: float = 0.1
    max_attempts: int | None = None

    def delay(self, attempt: int) -> float:
        """Seconds to wait before reconnect attempt `attempt` (0-based)."""
        base = min(self.max_s, self.initial_s * self.factor ** min(attempt, 64))
        spread = base * self.jitter
        return max(0.0, base + random.uniform(-spread, spread))


class ConnectionState(enum.Enum):
    """Where the client's stream stands."""

    IDLE = "idle"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    SUPERSEDED = "superseded"
    CLOSED = "closed"


@dataclass(frozen=True)
class WorkspaceSession:
    """The session ConnectWorkspace chose: a reused blank one or a new one."""

    session: sl.SessionSummary
    reused: bool


@dataclass(frozen=True)
class PlanAnswer:
    """A stateless plan read or selection (no session object, no fences
    beyond the request's own)."""

    value: PlanValue
    seq: int
    outcome: str | None = None


class AgentHostClient:
    """An async client of the gateway.

    Use as `async with AgentHostClient(address, token) as client:` (connects
    the stream), or call `connect()` / `close()`. Unary helpers work without
    the stream; `open_session` starts it when needed."""

    def __init__(
        self,
        address: str,
        token: str | None,
        *,
        client_id: str | None = None,
        generation: int = 0,
        backoff: Backoff | None = None,
        call_timeout: float = DEFAULT_CALL_TIMEOUT_S,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT_S,
        message_limit: int = DEFAULT_MESSAGE_LIMIT,
        interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
        tls_roots: bytes | None = None,
    ) -> None:
        self.address = address
        self.client_id = client_id or f"py-{uuid.uuid4().hex[:16]}"
        self.generation = generation
        self.backoff = backoff or Backoff()
        self.call_timeout = call_timeout
        # No frame at all (heartbeats included) for this long: reconnect.
        self.idle_timeout = idle_timeout
        self.message_limit = message_limit
        self.state = ConnectionState.IDLE
        # Why the client stopped for good (superseded, unauthenticated, closed).
        self.failure: AgentHostError | None = None
        # Counters: confirmed connections, frames received, heartbeats among them.
        self.connects = 0
        self.frames = 0
        self.heartbeats = 0
        self._channel = authorized_channel(address, token, interceptors, tls_roots=tls_roots)
        self.stub = gw_grpc.GatewayServiceStub(self._channel)
        self._request_id = 0
        # Per session, the newest seq of a plan write this client saw
        # acknowledged: its plan reads ask for that or later (another gateway
        # replica may not have followed the write yet).
        self._plan_written: dict[str, int] = {}
        self._sessions: dict[str, Session] = {}
        # The account's sessions as frames and lists show them.
        self.session_list = SessionList()
        # Frames of sessions not opened (yet): adopted by an open that follows.
        self._early: OrderedDict[str, deque[Frame]] = OrderedDict()
        self._listeners: list[FrameListener] = []
        self._stream_task: asyncio.Task[None] | None = None
        self._call: Any = None
        self._connected = asyncio.Event()
        self._state_changed = asyncio.Event()
        self._closing = asyncio.Event()
        self._cut = False

    async def __aenter__(self) -> AgentHostClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- fences ---------------------------------------------------------------------

    def fence(self) -> gw.RequestFence:
        """The next request's fence: this connection's generation and a new id."""
        self._request_id += 1
        return gw.RequestFence(
            client_id=self.client_id, generation=self.generation, request_id=self._request_id
        )

    def plan_written(self, session_id: str, seq: int) -> None:
        """A plan write of this client landed at `seq`."""
        self._plan_written[session_id] = max(self._plan_written.get(session_id, -1), seq)

    def plan_read(self, session_id: str) -> gw.PlanModeRequest:
        """A plan read that reflects this client's own plan writes."""
        request = gw.PlanModeRequest(fence=self.fence(), session_id=session_id)
        if session_id in self._plan_written:
            request.min_seq = self._plan_written[session_id]
        return request

    # -- the stream ---------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether the gateway confirmed the current stream."""
        return self.state is ConnectionState.CONNECTED

    async def connect(self, within: float | None = None) -> None:
        """Start the stream (once) and wait until the gateway confirmed it.
        Raises UnauthenticatedError / SupersededError, or TransportError when
        the backoff gave up."""
        if self.failure is not None:
            raise self.failure
        if self._stream_task is None:
            self.state = ConnectionState.CONNECTING
            self._stream_task = asyncio.create_task(self._run(), name="agenthost-connect")
        await self._wait_state(
            lambda: self.connected or self.failure is not None,
            self.call_timeout if within is None else within,
        )
        if self.failure is not None:
            raise self.failure

    async def reconnect(self, within: float | None = None) -> int:
        """Cut the stream now and reconnect at once (a new generation), e.g.
        after a network change. Returns the new generation."""
        if self._stream_task is None:
            await self.connect(within)
            return self.generation
        before = self.generation
        self._cut = True
        self._connected.clear()
        if self._call is not None:
            self._call.cancel()
        await self._wait_state(
            lambda: (self.connected and self.generation > before) or self.failure is not None,
            self.call_timeout if within is None else within,
        )
        if self.failure is not None:
            raise self.failure
        return self.generation

    async def wait_connected(self, within: float | None = None) -> None:
        """Wait until the stream is confirmed; raises the client's failure."""
        await self._wait_state(
            lambda: self.connected or self.failure is not None,
            self.call_timeout if within is None else within,
        )
        if self.failure is not None:
            raise self.failure

    async def _wait_state(self, done: Callable[[], bool], within: float) -> None:
        try:
            await self.wait_for(done, within)
        except TimeoutError:
            raise TransportError(
                f"no connection to the gateway at {self.address} within {within}s",
                code="UNAVAILABLE",
            ) from None

    async def wait_for(self, predicate: Callable[[], bool], within: float) -> None:
        """Wait (at most `within` seconds) until `predicate()` holds; checked
        whenever a frame arrives or the connection state changes."""
        async with asyncio.timeout(within):
            while True:
                changed = self._state_changed
                if predicate():
                    return
                await changed.wait()

    def _set_state(self, state: ConnectionState) -> None:
        self.state = state
        self._wake()

    def _wake(self) -> None:
        changed, self._state_changed = self._state_changed, asyncio.Event()
        changed.set()

    async def _run(self) -> None:
        attempt = 0
        while not self._closing.is_set():
            confirmed, error = await self._stream_once()
            if isinstance(error, StaleRequestError):
                self._fail(SupersededError(error.message, code=error.code, reason=error.reason))
                return
            if isinstance(error, UnauthenticatedError):
                self._fail(error)
                return
            if error is not None:
                log.info("gateway stream lost (%s)", error)
            self._connected.clear()
            if self._closing.is_set():
                return
            cut, self._cut = self._cut, False
            if confirmed or cut:
                self._next_generation()
            self._set_state(ConnectionState.RECONNECTING)
            for session in list(self._sessions.values()):
                session.on_disconnected()
            if confirmed:
                attempt = 0
            if cut:
                continue
            limit = self.backoff.max_attempts
            if limit is not None and attempt >= limit:
                self._fail(TransportError(f"gave up after {attempt} reconnect attempts"))
                return
            delay = self.backoff.delay(attempt)
            attempt += 1
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._closing.wait()

    def _next_generation(self) -> None:
        """A new generation as soon as a stream the gateway confirmed is lost
        (or cut), not after the backoff: a request made while reconnecting
        carries the generation the next stream presents, so that stream never
        fences it out as STALE. Attempts that were never confirmed are retried
        in the same generation for the same reason; requests in flight from
        the lost stream stay superseded."""
        self.generation += 1
        for session in list(self._sessions.values()):
            session.on_generation(self.generation)

    async def _stream_once(self) -> tuple[bool, AgentHostError | None]:
        """One Connect call until it ends: whether the gateway confirmed it,
        and the error that ended it (None: it ended, or was cut or timed out).
        A confirmed stream that fails (a gateway killed) is as lost as one
        that ends: its generation is over either way."""
        cursors = {
            sid: cursor
            for sid, session in self._sessions.items()
            if (cursor := session.cursor) is not None
        }
        call = self.stub.Connect(
            gw.ConnectRequest(client_id=self.client_id, generation=self.generation, cursors=cursors)
        )
        self._call = call
        confirmed = False
        try:
            while True:
                if self._cut:
                    return confirmed, None
                async with asyncio.timeout(self.idle_timeout or None):
                    frame = await call.read()
                if frame is grpc.aio.EOF:
                    return confirmed, None
                if frame.HasField("connected"):
                    confirmed = True
                    self.connects += 1
                    self._connected.set()
                    self._set_state(ConnectionState.CONNECTED)
                    for session in list(self._sessions.values()):
                        session.on_connected(self.generation)
                    continue
                self._dispatch(frame)
        except TimeoutError:
            log.info("no frame from the gateway for %ss; reconnecting", self.idle_timeout)
            return confirmed, None
        except asyncio.CancelledError:
            # A cancelled call cancels its pending read; only a cancel of this
            # task itself (close) goes on.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            return confirmed, None
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.CANCELLED and (self._cut or self._closing.is_set()):
                return confirmed, None
            return confirmed, error_from_rpc(error)
        finally:
            call.cancel()
            self._call = None

    def _dispatch(self, frame: Frame) -> None:
        self.frames += 1
        if frame.HasField("heartbeat"):
            self.heartbeats += 1
        self._wake()
        for listener in list(self._listeners):
            try:
                listener(frame)
            except Exception:
                log.exception("a frame listener failed")
        self.session_list.on_frame(frame)
        session_id = frame_session_id(frame)
        session = self._sessions.get(session_id) if session_id else None
        if session is not None:
            session.on_frame(frame)
        elif session_id:
            self._keep_early(session_id, frame)

    def _keep_early(self, session_id: str, frame: Frame) -> None:
        """Hold a frame of a session not opened yet (bounded per session and
        in sessions), so an open that follows misses nothing."""
        held = self._early.get(session_id)
        if held is None:
            held = self._early[session_id] = deque(maxlen=EARLY_FRAMES_KEPT)
            while len(self._early) > EARLY_SESSIONS_KEPT:
                self._early.popitem(last=False)
        held.append(frame)

    def add_listener(self, listener: FrameListener) -> Callable[[], None]:
        """Call `listener` with every frame (session_added, heartbeats, …);
        returns a function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _fail(self, error: AgentHostError) -> None:
        self.failure = error
        self._connected.clear()
        self._set_state(
            ConnectionState.SUPERSEDED
            if isinstance(error, SupersededError)
            else ConnectionState.CLOSED
        )
        for session in list(self._sessions.values()):
            session.on_disconnected()

    async def close(self) -> None:
        """Stop the stream, close every open session and the channel."""
        self._closing.set()
        if self.failure is None:
            self.failure = ClientClosedError("the client was closed")
        for session in list(self._sessions.values()):
            await session.close()
        if self._call is not None:
            self._call.cancel()
        if self._stream_task is not None:
            self._stream_task.cancel()
            await asyncio.gather(self._stream_task, return_exceptions=True)
        self._set_state(ConnectionState.CLOSED)
        await self._channel.close()

    # -- unary calls ------------------------------------------------------------------------

    async def call(
        self,
        rpc: Callable[..., Awaitable[Any]],
        request: Message,
        *,
        deadline: float | None = None,
    ) -> Any:
        """One unary call with a deadline (seconds; the client's default when
        None); failures as typed errors."""
        try:
            return await rpc(request, timeout=self.call_timeout if deadline is None else deadline)
        except grpc.aio.AioRpcError as error:
            raise error_from_rpc(error) from error

    # -- workspaces -------------------------------------------------------------------------

    async def list_workspaces(self) -> list[ws.Workspace]:
        """The account's workspaces, in creation order."""
        reply: gw.ListWorkspacesResponse = await self.call(
            self.stub.ListWorkspaces, gw.ListWorkspacesRequest()
        )
        return list(reply.workspaces)

    async def create_workspace(self, path: str) -> ws.Workspace:
        """The workspace of an absolute path (the existing one when known)."""
        reply: gw.CreateWorkspaceResponse = await self.call(
            self.stub.CreateWorkspace, gw.CreateWorkspaceRequest(path=path)
        )
        return reply.workspace

    async def connect_workspace(self, workspace_id: str) -> WorkspaceSession:
        """The session New Session lands in: a reusable blank member, or a new one."""
        reply: gw.ConnectWorkspaceResponse = await self.call(
            self.stub.ConnectWorkspace,
            gw.ConnectWorkspaceRequest(fence=self.fence(), workspace_id=workspace_id),
        )
        return WorkspaceSession(reply.session, reply.reused)

    async def recent_workspace(self) -> ws.Workspace | None:
        """The workspace whose sessions were updated last (None: no workspace)."""
        reply: gw.RecentWorkspaceResponse = await self.call(
            self.stub.RecentWorkspace, gw.RecentWorkspaceRequest()
        )
        return reply.workspace if reply.HasField("workspace") else None

    # -- sessions ---------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        cwd: str | None = None,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> sl.SessionSummary:
        """A new session in a workspace, or in the workspace of `cwd`.
        `session_id` is the account's key for it (the same key returns the
        same session); the session's id is the returned summary's `id`."""
        if (cwd is None) == (workspace_id is None):
            raise ValueError("give exactly one of cwd and workspace_id")
        request = gw.CreateSessionRequest(fence=self.fence(), session_id=session_id or "")
        if cwd is not None:
            request.cwd = cwd
        else:
            assert workspace_id is not None
            request.workspace_id = workspace_id
        reply: gw.CreateSessionResponse = await self.call(self.stub.CreateSession, request)
        return reply.session

    async def list_sessions(
        self, workspace_id: str | None = None, *, include_archived: bool = False
    ) -> list[sl.SessionSummary]:
        """Every listed session of the account's workspaces (of one, when
        given), most recently updated first, across all pages; the mirror
        `session_list` takes them in (blank never comes back)."""
        sessions: list[sl.SessionSummary] = []
        token = ""
        while True:
            page, token = await self.list_sessions_page(
                workspace_id, page_token=token, include_archived=include_archived
            )
            sessions += page
            if not token:
                return sessions

    async def list_sessions_page(
        self,
        workspace_id: str | None = None,
        *,
        page_size: int | None = None,
        page_token: str = "",
        include_archived: bool = False,
    ) -> tuple[list[sl.SessionSummary], str]:
        """One page of the list and the token of the next ("" at the end)."""
        request = gw.ListSessionsRequest(
            workspace_id=workspace_id or "",
            page_token=page_token,
            include_archived=include_archived,
        )
        if page_size is not None:
            request.page_size = page_size
        reply: gw.ListSessionsResponse = await self.call(self.stub.ListSessions, request)
        self.session_list.apply_list(reply.sessions)
        return list(reply.sessions), reply.next_page_token

    async def search_sessions(
        self,
        query: str,
        *,
        workspace_id: str | None = None,
        include_archived: bool = False,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        page_size: int | None = None,
        page_token: str = "",
    ) -> gw.SearchSessionsResponse:
        """One page of the account's sessions found by `query` (words,
        "phrases", -excluded, `or`) in their titles, prompts, answers and
        the paths their tools touched, best first, each with a snippet
        whose matched words are `highlighted`; `next_page_token` ("" at
        the end) asks for the next page of the same query."""
        request = gw.SearchSessionsRequest(
            query=query,
            workspace_id=workspace_id or "",
            include_archived=include_archived,
            page_token=page_token,
        )
        if page_size is not None:
            request.page_size = page_size
        times = {
            "updated_after": updated_after,
            "updated_before": updated_before,
            "created_after": created_after,
            "created_before": created_before,
        }
        for name, moment in times.items():
            if moment is not None:
                getattr(request, name).FromDatetime(moment)
        reply: gw.SearchSessionsResponse = await self.call(self.stub.SearchSessions, request)
        return reply

    async def list_subagents(self, session_id: str) -> list[sl.SessionSummary]:
        """The sessions of the subagents a session started (its `task`
        calls), which the other lists leave out."""
        request = gw.ListSessionsRequest(parent_session_id=session_id, page_size=500)
        reply: gw.ListSessionsResponse = await self.call(self.stub.ListSessions, request)
        return list(reply.sessions)

    async def rename_session(self, session_id: str, title: str) -> sl.SessionSummary:
        """Give a session a title (recorded in its log as session/title)."""
        reply: gw.RenameSessionResponse = await self.call(
            self.stub.RenameSession,
            gw.RenameSessionRequest(fence=self.fence(), session_id=session_id, title=title),
        )
        return reply.session

    async def archive_session(self, session_id: str, archived: bool = True) -> sl.SessionSummary:
        """Archive a session (hidden from lists unless asked), or bring it back."""
        reply: gw.ArchiveSessionResponse = await self.call(
            self.stub.ArchiveSession,
            gw.ArchiveSessionRequest(fence=self.fence(), session_id=session_id, archived=archived),
        )
        return reply.session

    async def fork_session(
        self, session_id: str, up_to_seq: int | None = None
    ) -> sl.SessionSummary:
        """A new session in the same workspace with the log up to `up_to_seq`."""
        request = gw.ForkSessionRequest(fence=self.fence(), session_id=session_id)
        if up_to_seq is not None:
            request.up_to_seq = up_to_seq
        reply: gw.ForkSessionResponse = await self.call(self.stub.ForkSession, request)
        return reply.session

    async def delete_session(self, session_id: str) -> None:
        """Delete a session and its log (a running turn is cancelled)."""
        await self.call(
            self.stub.DeleteSession,
            gw.DeleteSessionRequest(fence=self.fence(), session_id=session_id),
        )

    async def export_session(self, session_id: str) -> AsyncIterator[str]:
        """The session's events as JSON lines, oldest first."""
        # No deadline: a long log takes as long as it takes; it ends by itself.
        call = self.stub.ExportSession(gw.ExportSessionRequest(session_id=session_id))
        try:
            async for reply in call:
                yield reply.line
        except grpc.aio.AioRpcError as error:
            raise error_from_rpc(error) from error
        finally:
            call.cancel()

    async def list_commands(self, session_id: str) -> list[rt.CommandInfo]:
        """The slash commands a session offers."""
        reply: gw.ListCommandsResponse = await self.call(
            self.stub.ListCommands, gw.ListCommandsRequest(session_id=session_id)
        )
        return list(reply.commands)

    async def list_models(self, session_id: str) -> list[ModelInfo]:
        """The models a session can switch to (the deployment's models
        file), the default marked."""
        reply: gw.ListModelsResponse = await self.call(
            self.stub.ListModels, gw.ListModelsRequest(session_id=session_id)
        )
        return [model_info(info) for info in reply.models]

    async def open_session(self, session_id: str, *, message_limit: int | None = None) -> Session:
        """A live session object: history, then the full plan state, kept
        current from the stream (the stream is started when needed)."""
        existing = self._sessions.get(session_id)
        if existing is not None:
            return existing
        await self.connect()
        session = Session(self, session_id, message_limit or self.message_limit)
        self._sessions[session_id] = session
        for frame in self._early.pop(session_id, ()):
            session.on_frame(frame)
        try:
            await session.load()
        except BaseException:
            await session.close()
            raise
        return session

    def closed(self, session: SessionFeed) -> None:
        """A session object stopped following its frames (SessionHost)."""
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]

    @property
    def sessions(self) -> dict[str, Session]:
        """The open session objects, by id."""
        return dict(self._sessions)

    # -- stateless plan calls (no session object) -------------------------------------------------

    async def plan_mode(self, session_id: str) -> PlanAnswer:
        """A session's plan state, read without a session object."""
        reply: gw.PlanModeResponse = await self.call(self.stub.PlanMode, self.plan_read(session_id))
        return PlanAnswer(plan_value(reply.plan), reply.seq)

    async def set_plan_mode(self, session_id: str, active: bool) -> PlanAnswer:
        """Select plan mode for a session without a session object."""
        reply: gw.SetPlanModeResponse = await self.call(
            self.stub.SetPlanMode,
            gw.SetPlanModeRequest(fence=self.fence(), session_id=session_id, active=active),
        )
        self.plan_written(session_id, reply.seq)
        return PlanAnswer(plan_value(reply.plan), reply.seq, outcome_name(reply.outcome))


def frame_session_id(frame: Frame) -> str:
    """The session a frame is about ("" for connection-wide frames)."""
    kind = frame.WhichOneof("frame")
    if kind == "session_event":
        return frame.session_event.session_id
    if kind == "session_status":
        return frame.session_status.session_id
    if kind == "commands_changed":
        return frame.commands_changed.session_id
    if kind == "session_projection":
        return frame.session_projection.session_id
    if kind == "assistant_delta":
        return frame.assistant_delta.session_id
    if kind == "tool_output":
        return frame.tool_output.session_id
    if kind == "resync":
        return frame.resync.session_id
    return ""
