"""The Python SDK against the running gateway (the whole stack on loopback).

Orders that real networks produce only by chance (a reply overtaken by a
commit, a request delayed past a reconnect, a lost frame) are produced on cue
by client interceptors on the SDK's own channel: `Gate` holds a real request
or a real reply of the gateway until the test lets it go, `StreamTap` holds a
reconnect, drops chosen frames of the real stream or slips a frame into it.
Nothing answers in the gateway's place.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.sessionlog.v1 import events_pb2

from clients.sdk import (
    AgentBusyError,
    AgentHostClient,
    Backoff,
    ConnectionState,
    EventAppended,
    HistoryLoaded,
    PlanSelectionFailedError,
    PlanState,
    PromptMode,
    Session,
    StaleRequestError,
    SupersededError,
    TransportError,
    Verdict,
    assistant_texts,
    user_texts,
)
from clients.sdk.plan import RequestKind
from services.agentruntime.models.builtin import ScriptedReply, ScriptedToolCall
from services.sessionlog.client import SessionLogClient
from tests.support.gateway import ALICE, GatewayHarness, running_gateway

WAIT_S = 10.0
Frame = gw.ConnectResponse
PLAN_MODE = "/agenthost.gateway.v1.GatewayService/PlanMode"
SET_PLAN_MODE = "/agenthost.gateway.v1.GatewayService/SetPlanMode"
OPEN_SESSION = "/agenthost.gateway.v1.GatewayService/OpenSession"
CONNECT = "/agenthost.gateway.v1.GatewayService/Connect"
PROMPT = "/agenthost.gateway.v1.GatewayService/Prompt"

OFF, ON = PlanState(False), PlanState(True)


def method_of(details: grpc.aio.ClientCallDetails) -> str:
    method = details.method
    return method.decode() if isinstance(method, bytes) else str(method)


# -- holding real calls on cue -------------------------------------------------------


@dataclass(eq=False)
class Held:
    """One call held at the gate."""

    method: str
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _go: asyncio.Event = field(default_factory=asyncio.Event)

    def release(self) -> None:
        self._go.set()


@dataclass(eq=False)
class Hold:
    """Holds calls of one method, before the request leaves or after the
    gateway's reply arrived, until each is released."""

    method: str
    phase: str  # "request" or "reply"
    limit: int | None
    calls: list[Held] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def open(self) -> bool:
        return self.limit is None or len(self.calls) < self.limit

    def take(self) -> Held:
        held = Held(self.method)
        self.calls.append(held)
        self._changed.set()
        return held

    async def arrived(self, count: int = 1) -> list[Held]:
        """The first `count` held calls, once they all reached the gate."""
        async with asyncio.timeout(WAIT_S):
            while len(self.calls) < count:
                self._changed.clear()
                await self._changed.wait()
            for held in self.calls[:count]:
                await held.arrived.wait()
        return self.calls[:count]

    def release_all(self) -> None:
        self.limit = 0
        for held in self.calls:
            held.release()


class Gate(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self) -> None:
        self.holds: list[Hold] = []

    def hold(self, method: str, *, phase: str, limit: int | None = 1) -> Hold:
        hold = Hold(method, phase, limit)
        self.holds.append(hold)
        return hold

    def _claim(self, method: str) -> tuple[Hold, Held] | None:
        for hold in self.holds:
            if hold.method == method and hold.open:
                return hold, hold.take()
        return None

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        claimed = self._claim(method_of(details))
        if claimed is None:
            return await continuation(details, request)
        hold, held = claimed
        if hold.phase == "request":
            held.arrived.set()
            await held._go.wait()
            return await continuation(details, request)
        call = await continuation(details, request)
        try:
            reply = await call
        finally:
            held.arrived.set()
            await held._go.wait()
        return reply


class StreamTap(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """On the Connect stream: hold reconnects, drop chosen frames, inject frames."""

    def __init__(self) -> None:
        self.connect_hold: Hold | None = None
        self.drop: Callable[[Frame], bool] = lambda frame: False
        self.dropped: list[Frame] = []
        self.dropping = asyncio.Event()
        self._inject: asyncio.Queue[Frame] | None = None

    def hold_connect(self) -> Hold:
        self.connect_hold = Hold(CONNECT, "request", 1)
        return self.connect_hold

    def inject(self, frame: Frame) -> None:
        assert self._inject is not None, "no stream is open"
        self._inject.put_nowait(frame)

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        if method_of(details) != CONNECT:
            return await continuation(details, request)
        hold = self.connect_hold
        if hold is not None and hold.open:
            held = hold.take()
            held.arrived.set()
            await held._go.wait()
        call = await continuation(details, request)
        self._inject = asyncio.Queue()
        return self._merge(call, self._inject)

    async def _merge(self, call: Any, injected: asyncio.Queue[Frame]) -> AsyncIterator[Frame]:
        reading: asyncio.Future[Any] | None = None
        waiting: asyncio.Future[Frame] | None = None
        try:
            while True:
                reading = reading or asyncio.ensure_future(call.read())
                waiting = waiting or asyncio.ensure_future(injected.get())
                done, _ = await asyncio.wait({reading, waiting}, return_when="FIRST_COMPLETED")
                if waiting in done:
                    frame, waiting = waiting.result(), None
                    yield frame
                    continue
                frame, reading = reading.result(), None
                if frame is grpc.aio.EOF:
                    return
                if self.drop(frame):
                    self.dropped.append(frame)
                    self.dropping.set()
                    continue
                yield frame
        finally:
            for task in (reading, waiting):
                if task is not None:
                    task.cancel()
            call.cancel()


# -- fixtures and helpers ----------------------------------------------------------------


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[GatewayHarness]:
    async with running_gateway(tmp_path) as harness:
        yield harness


@dataclass
class Clients:
    harness: GatewayHarness
    opened: list[AgentHostClient] = field(default_factory=list)

    def new(self, **options: Any) -> AgentHostClient:
        options.setdefault("token", ALICE)
        options.setdefault("backoff", Backoff(initial_s=0.02, max_s=0.2))
        client = AgentHostClient(self.harness.address, **options)
        self.opened.append(client)
        return client


@pytest.fixture
async def clients(gateway: GatewayHarness) -> AsyncIterator[Clients]:
    made = Clients(gateway)
    yield made
    for client in made.opened:
        await client.close()


async def new_session(client: AgentHostClient) -> str:
    # Its cwd becomes its workspace, which must be an existing folder.
    return (await client.create_session(cwd=tempfile.gettempdir())).id


def plan_is(state: PlanState | None) -> Callable[[Session], bool]:
    return lambda s: s.plan.available is True and s.plan.state == state


def idle_after(text: str) -> Callable[[Session], bool]:
    return lambda s: not s.running and f"Echo: {text}" in assistant_texts(s.events)


def idle_with_turn_ended(count: int) -> Callable[[Session], bool]:
    return lambda s: not s.running and sum(1 for e in s.events if e.HasField("turn_end")) >= count


async def generating(gateway: GatewayHarness, session: Session) -> ScriptedReply:
    """A turn whose model request is held open (the model is generating); it
    calls an unknown tool so a continuation request follows its release."""
    reply = gateway.model.enqueue(
        ScriptedReply(text="working", tool_calls=[ScriptedToolCall("no_such_tool")], hold=True)
    )
    await session.prompt("go")
    await asyncio.wait_for(reply.started.wait(), WAIT_S)
    return reply


def contiguous_from_zero(session: Session) -> bool:
    return session.history.seqs == list(range(session.last_seq + 1))


async def matches_the_log(clients: Clients, session: Session) -> None:
    """The session holds the whole log, each event once, in order."""
    reader = clients.new(message_limit=500)
    log = (await reader.open_session(session.id)).events
    await session.wait_until(lambda s: s.last_seq >= log[-1].seq, WAIT_S)
    assert contiguous_from_zero(session)
    held = [(e.seq, e.id, e.WhichOneof("body")) for e in session.events]
    assert held == [(e.seq, e.id, e.WhichOneof("body")) for e in log]


# -- opening --------------------------------------------------------------------------------


async def test_open_loads_history_then_queries_the_full_plan_state(clients: Clients) -> None:
    writer = clients.new()
    session_id = await new_session(writer)
    first = await writer.open_session(session_id)
    await first.prompt("hello")
    await first.wait_until(idle_after("hello"), WAIT_S)
    await first.set_plan(True)

    reader = clients.new()
    session = await reader.open_session(session_id)
    assert contiguous_from_zero(session) and session.last_seq == first.last_seq
    assert assistant_texts(session.events) == ["Echo: hello"]
    assert session.plan.state == ON and session.plan.describe() == "on"
    # The plan value shows first, then the query. The value comes with the
    # page's block, unless the live frame of the change (seq 8, relayed by
    # the projection's feed after the reader connected) came first: the
    # block's equal value then changes nothing.
    decisions = list(session.plan_tracker.decisions)
    assert decisions[0].verdict is Verdict.VALUE_APPLIED
    assert decisions[0].seq in (session.last_seq - 1, session.last_seq)
    query = next(d.ticket for d in decisions[1:] if d.ticket is not None)
    assert query.kind is RequestKind.QUERY
    assert session.projections.get("plan") == {"active": True}
    assert not session.running and session.plan_error is None


# -- the seed's state table ------------------------------------------------------------------


async def test_plan_chosen_while_generating_is_pending_then_committed(
    gateway: GatewayHarness, clients: Clients
) -> None:
    client = clients.new()
    session = await client.open_session(await new_session(client))
    held = await generating(gateway, session)
    reply = await session.set_plan(True)
    assert reply.value.state == PlanState(False, pending=True) and reply.outcome == "queued"
    assert session.plan.state == PlanState(False, True)
    assert session.plan.describe() == "off → on (pending)"
    held.release()
    await session.wait_until(plan_is(ON), WAIT_S)
    await session.wait_until(
        lambda s: any(e.HasField("plan_mode") and e.plan_mode.active for e in s.events), WAIT_S
    )


async def test_default_chosen_while_generating_in_plan_mode(
    gateway: GatewayHarness, clients: Clients
) -> None:
    client = clients.new()
    session = await client.open_session(await new_session(client))
    await session.set_plan(True)
    held = await generating(gateway, session)
    reply = await session.set_plan(False)
    assert reply.value.state == PlanState(True, pending=False)
    assert session.plan.describe() == "on → off (pending)"
    held.release()
    await session.wait_until(plan_is(OFF), WAIT_S)


async def test_reverting_a_pending_plan_logs_nothing(
    gateway: GatewayHarness, clients: Clients
) -> None:
    client = clients.new()
    session = await client.open_session(await new_session(client))
    held = await generating(gateway, session)
    await session.set_plan(True)
    reverted = await session.set_plan(False)
    assert reverted.value.state == OFF and reverted.outcome == "cancelled"
    assert session.plan.state == OFF, list(session.plan_tracker.decisions)
    held.release()
    await session.wait_until(idle_with_turn_ended(1), WAIT_S)
    assert not any(e.HasField("plan_mode") for e in session.events)
    assert session.plan.state == OFF


async def test_without_plan_mode_both_calls_say_unavailable_and_prompts_work(
    tmp_path: Path,
) -> None:
    async with running_gateway(tmp_path, with_plan_mode=False) as harness:
        client = AgentHostClient(harness.address, ALICE)
        try:
            session_id = await new_session(client)
            session = await client.open_session(session_id)
            assert session.plan.available is False and session.plan.describe() == "unavailable"
            selected = await session.set_plan(True)
            assert not selected.value.available and session.plan.available is False
            await session.prompt("hello")
            await session.wait_until(idle_after("hello"), WAIT_S)
            # A committed plan/mode written by another writer of the log does
            # not make plan mode appear: only a query can say it exists.
            log_channel = harness.stack.channel("sessionlog")
            try:
                await SessionLogClient(log_channel).append(
                    session_id, [events_pb2.Event(plan_mode=events_pb2.PlanMode(active=True))]
                )
            finally:
                await log_channel.close()
            await session.wait_until(
                lambda s: any(e.HasField("plan_mode") for e in s.events), WAIT_S
            )
            assert session.plan.available is False and session.plan.state is None
        finally:
            await client.close()


async def test_stop_generation_keeps_the_pending_choice_for_the_next_prompt(
    gateway: GatewayHarness, clients: Clients
) -> None:
    client = clients.new()
    session = await client.open_session(await new_session(client))
    reply = gateway.model.enqueue(ScriptedReply(text="long answer", hold=True))
    await session.prompt("go")
    await asyncio.wait_for(reply.started.wait(), WAIT_S)
    await session.set_plan(True)
    assert await session.cancel()
    await session.wait_until(idle_with_turn_ended(1), WAIT_S)
    assert (await session.refresh_plan()).value.state == PlanState(False, True)
    assert session.plan.state == PlanState(False, True)
    await session.prompt("continue")
    await session.wait_until(plan_is(ON), WAIT_S)
    await session.wait_until(idle_with_turn_ended(2), WAIT_S)


async def test_prompts_send_queue_steer_and_carry_a_plan_target(
    gateway: GatewayHarness, clients: Clients
) -> None:
    client = clients.new()
    session = await client.open_session(await new_session(client))
    held = gateway.model.enqueue(ScriptedReply(text="thinking", hold=True))
    sent = await session.prompt("first", plan_target=True)
    assert sent.mode is PromptMode.SEND and sent.running
    await asyncio.wait_for(held.started.wait(), WAIT_S)
    await session.wait_until(plan_is(ON), WAIT_S)  # set before the send
    with pytest.raises(AgentBusyError):
        await session.prompt("not now")
    assert (await session.prompt("also this", PromptMode.STEER)).mode is PromptMode.STEER
    assert (await session.prompt("later", PromptMode.QUEUE)).mode is PromptMode.QUEUE
    held.release()
    await session.wait_until(idle_after("later"), WAIT_S)
    assert user_texts(session.events) == ["first", "also this", "later"]


async def test_two_clients_see_each_others_choice_pending_included(
    gateway: GatewayHarness, clients: Clients
) -> None:
    first, second = clients.new(), clients.new()
    session_id = await new_session(first)
    mine = await first.open_session(session_id)
    theirs = await second.open_session(session_id)
    held = await generating(gateway, mine)
    await theirs.set_plan(True)
    await mine.wait_until(plan_is(PlanState(False, True)), WAIT_S)
    held.release()
    await mine.wait_until(plan_is(ON), WAIT_S)
    await theirs.wait_until(plan_is(ON), WAIT_S)
    await mine.wait_until(lambda s: not s.running, WAIT_S)
    await mine.set_plan(False)
    await theirs.wait_until(plan_is(OFF), WAIT_S)


# -- fences ------------------------------------------------------------------------------------


async def test_an_open_superseded_by_a_reconnect_is_dropped_and_redone(
    clients: Clients,
) -> None:
    gate = Gate()
    client = clients.new(interceptors=[gate])
    session_id = await new_session(client)
    await client.connect()
    hold = gate.hold(OPEN_SESSION, phase="reply")
    opening = asyncio.create_task(client.open_session(session_id))
    (held,) = await hold.arrived()
    await client.reconnect()
    held.release()
    session = await asyncio.wait_for(opening, WAIT_S)
    # The open of the old generation was dropped whole; the redone one applied.
    assert session.dropped_loads == 1 and session.loads == 1
    assert session.plan.state == OFF


async def test_a_query_begun_before_a_reconnect_is_dropped_after_it(clients: Clients) -> None:
    gate = Gate()
    client = clients.new(interceptors=[gate])
    other = clients.new()
    session_id = await new_session(client)
    session = await client.open_session(session_id)
    hold = gate.hold(PLAN_MODE, phase="reply")
    query = asyncio.create_task(session.refresh_plan())
    (held,) = await hold.arrived()  # the gateway answered "off"
    await (await other.open_session(session_id)).set_plan(True)
    await session.wait_until(plan_is(ON), WAIT_S)
    await client.reconnect()
    held.release()
    reply = await asyncio.wait_for(query, WAIT_S)
    assert reply.value.state == OFF
    assert reply.decision.verdict is Verdict.SUPERSEDED
    assert session.plan.state == ON
    # The reconnect itself re-queried the plan state, in the new generation.
    await session.wait_until(
        lambda s: any(
            d.verdict is Verdict.APPLIED
            and d.ticket is not None
            and d.ticket.kind is RequestKind.QUERY
            and d.ticket.generation == 1
            for d in s.plan_tracker.decisions
        ),
        WAIT_S,
    )


async def test_a_commit_on_the_stream_overtaking_a_query_reply_wins(clients: Clients) -> None:
    gate = Gate()
    client = clients.new(interceptors=[gate])
    other = clients.new()
    session_id = await new_session(client)
    session = await client.open_session(session_id)
    hold = gate.hold(PLAN_MODE, phase="reply", limit=None)
    query = asyncio.create_task(session.refresh_plan())
    (held,) = await hold.arrived()  # answered "off" as of the log before the commit
    await (await other.open_session(session_id)).set_plan(True)
    # The commit arrives on the stream while the reply is still on its way.
    await session.wait_until(plan_is(ON), WAIT_S)
    held.release()
    reply = await asyncio.wait_for(query, WAIT_S)
    assert reply.value.state == OFF
    assert reply.decision.verdict is Verdict.NEWER_KNOWN
    assert session.plan.state == ON
    hold.release_all()


async def test_an_older_reply_arriving_after_a_newer_one_is_dropped(
    gateway: GatewayHarness, clients: Clients
) -> None:
    gate = Gate()
    client = clients.new(interceptors=[gate])
    session = await client.open_session(await new_session(client))
    running = await generating(gateway, session)
    hold = gate.hold(PLAN_MODE, phase="reply", limit=None)
    query = asyncio.create_task(session.refresh_plan())
    (held,) = await hold.arrived()  # "off", no selection yet
    selected = await session.set_plan(True)  # newer: queued while the turn runs
    assert selected.decision.verdict is Verdict.APPLIED
    assert session.plan.state == PlanState(False, True)
    held.release()
    reply = await asyncio.wait_for(query, WAIT_S)
    assert reply.value.state == OFF
    assert reply.decision.verdict is Verdict.OLDER_REQUEST
    assert session.plan.state == PlanState(False, True)
    hold.release_all()
    running.release()
    await session.wait_until(plan_is(ON), WAIT_S)


async def test_a_request_of_a_superseded_generation_is_stale_and_not_applied(
    clients: Clients,
) -> None:
    gate = Gate()
    client = clients.new(interceptors=[gate])
    session = await client.open_session(await new_session(client))
    hold = gate.hold(SET_PLAN_MODE, phase="request")
    selecting = asyncio.create_task(session.set_plan(True))
    (held,) = await hold.arrived()  # fenced with generation 0, not sent yet
    assert await client.reconnect() == 1
    held.release()
    with pytest.raises(StaleRequestError) as stale:
        await asyncio.wait_for(selecting, WAIT_S)
    assert stale.value.reason == "STALE"
    assert session.plan.state == OFF
    assert (await session.refresh_plan()).value.state == OFF


async def test_a_prompt_made_while_the_gateway_restarts_is_applied_not_stale(
    gateway: GatewayHarness, clients: Clients
) -> None:
    gate = Gate()
    client = clients.new(interceptors=[gate])
    session = await client.open_session(await new_session(client))
    await gateway.stack.stop_service("gateway")
    await client.wait_for(lambda: client.state is ConnectionState.RECONNECTING, WAIT_S)
    # Typed while the client reconnects; it reaches the gateway only after
    # the new stream does.
    hold = gate.hold(PROMPT, phase="request")
    prompting = asyncio.create_task(session.prompt("after the restart"))
    (held,) = await hold.arrived()
    await gateway.stack.start_service("gateway")
    await client.wait_for(lambda: client.connected, WAIT_S)
    held.release()
    async with asyncio.timeout(WAIT_S):
        await prompting
    await session.wait_until(idle_after("after the restart"), WAIT_S)
    assert client.generation == 1  # one lost stream, however many attempts it took


async def test_a_client_whose_id_reconnected_elsewhere_is_superseded(clients: Clients) -> None:
    old = clients.new(client_id="laptop-1")
    session = await old.open_session(await new_session(old))
    # The same client identity comes back with a newer generation (a restart).
    new = clients.new(client_id="laptop-1", generation=5)
    await new.connect()
    with pytest.raises(StaleRequestError):
        await session.set_plan(True)
    with pytest.raises(SupersededError):
        await old.reconnect()
    assert (await new.plan_mode(session.id)).value.state == OFF


async def test_a_failed_query_keeps_history_and_the_last_known_state(
    gateway: GatewayHarness, clients: Clients
) -> None:
    client = clients.new(call_timeout=1.5)
    session = await client.open_session(await new_session(client))
    await session.prompt("hello")
    await session.wait_until(idle_after("hello"), WAIT_S)
    await session.set_plan(True)
    await session.wait_until(plan_is(ON), WAIT_S)
    history = list(session.events)

    # The projections go away, and a restarted gateway has no plan of its
    # own to answer from: a plan query cannot be answered.
    await gateway.stack.stop_service("projection")
    before = client.generation
    await gateway.stack.restart("gateway")
    await client.wait_for(lambda: client.connected and client.generation > before, WAIT_S)
    with pytest.raises(TransportError):
        await session.refresh_plan()
    assert isinstance(session.plan_error, TransportError)
    assert session.plan.state == ON
    assert session.events[: len(history)] == history and contiguous_from_zero(session)
    assert [s.id for s in await client.list_sessions()] == [session.id]

    await gateway.stack.start_service("projection")
    recovered = await session.refresh_plan(deadline=WAIT_S)
    # The gateway ends its streams once it follows the projections again, so
    # the query the reconnect makes may answer first: either way it applied.
    assert recovered.decision.verdict in (Verdict.APPLIED, Verdict.OLDER_REQUEST)
    assert session.plan_error is None and session.plan.state == ON


async def test_a_failed_selection_keeps_the_state_and_blocks_a_plan_targeted_prompt(
    gateway: GatewayHarness, clients: Clients
) -> None:
    client = clients.new(call_timeout=1.5)
    session = await client.open_session(await new_session(client))
    await session.set_plan(True)
    await gateway.stack.stop_service("planmode")
    with pytest.raises(TransportError):
        await session.set_plan(False)
    assert session.plan.state == ON and isinstance(session.plan_error, TransportError)
    sent_before = session.last_seq
    # Refused here, unsent: the user's last choice did not take.
    with pytest.raises(PlanSelectionFailedError):
        await session.prompt("do it", plan_target=False)
    assert session.last_seq == sent_before
    await gateway.stack.start_service("planmode")
    # The short deadline was for the outage: the gateway's channel to plan
    # mode may take a reconnect backoff to come back.
    client.call_timeout = WAIT_S
    await session.set_plan(False)
    await session.prompt("do it", plan_target=False)
    await session.wait_until(idle_after("do it"), WAIT_S)


async def test_an_older_failed_selection_does_not_block_a_plan_targeted_prompt(
    clients: Clients,
) -> None:
    gate = Gate()
    client = clients.new(interceptors=[gate])
    session = await client.open_session(await new_session(client))
    hold = gate.hold(SET_PLAN_MODE, phase="request")
    older = asyncio.create_task(session.set_plan(True))
    (held,) = await hold.arrived()
    await session.set_plan(False)  # newer: it supersedes the held one
    await client.reconnect()  # the held one will fail as STALE (old generation)
    held.release()
    with pytest.raises(StaleRequestError):
        await older
    await session.prompt("hello", plan_target=False)
    await session.wait_until(idle_after("hello"), WAIT_S)


async def test_a_malformed_event_is_ignored(clients: Clients) -> None:
    tap = StreamTap()
    client = clients.new(interceptors=[tap])
    session = await client.open_session(await new_session(client))
    await session.prompt("hello")
    await session.wait_until(idle_after("hello"), WAIT_S)
    before, next_seq = list(session.events), session.last_seq + 1
    malformed = [
        # The frame's seq and its event's disagree.
        gw.SessionEvent(
            session_id=session.id,
            seq=next_seq,
            event=events_pb2.Event(seq=next_seq + 7, plan_mode=events_pb2.PlanMode(active=True)),
        ),
        # No body.
        gw.SessionEvent(session_id=session.id, seq=next_seq, event=events_pb2.Event(seq=next_seq)),
        # A negative seq.
        gw.SessionEvent(
            session_id=session.id,
            seq=-1,
            event=events_pb2.Event(seq=-1, plan_mode=events_pb2.PlanMode(active=True)),
        ),
        # Another session's event under this session's id.
        gw.SessionEvent(
            session_id=session.id,
            seq=next_seq,
            event=events_pb2.Event(
                seq=next_seq, session_id="s-other", plan_mode=events_pb2.PlanMode(active=True)
            ),
        ),
        # Breaks the schema (a tool call without a name).
        gw.SessionEvent(
            session_id=session.id,
            seq=next_seq,
            event=events_pb2.Event(seq=next_seq, tool_call=events_pb2.ToolCall(call_id="c")),
        ),
    ]
    for frame in malformed:
        tap.inject(Frame(session_event=frame))
    await session.wait_until(lambda s: s.ignored_frames == len(malformed), WAIT_S)
    assert session.events == before and session.plan.state == OFF
    assert session.history.missing() is None
    await session.prompt("after")
    await session.wait_until(idle_after("after"), WAIT_S)
    assert contiguous_from_zero(session) and session.plan.state == OFF


async def test_a_lost_projection_frame_is_made_up_by_the_resumed_stream(
    clients: Clients,
) -> None:
    tap = StreamTap()
    client = clients.new(interceptors=[tap])
    other = clients.new()
    session_id = await new_session(client)
    session = await client.open_session(session_id)
    tap.drop = lambda f: f.HasField("session_projection") and f.session_projection.key == "plan"
    await (await other.open_session(session_id)).set_plan(True)
    await asyncio.wait_for(tap.dropping.wait(), WAIT_S)
    await session.wait_until(lambda s: any(e.HasField("plan_mode") for e in s.events), WAIT_S)
    assert session.plan.state == OFF
    tap.drop = lambda f: False
    await client.reconnect()
    # The resumed stream sends the current values; the higher seq wins.
    await session.wait_until(plan_is(ON), WAIT_S)


async def test_a_resync_reopens_the_session(clients: Clients) -> None:
    tap = StreamTap()
    client = clients.new(interceptors=[tap])
    session = await client.open_session(await new_session(client))
    await session.prompt("hello")
    await session.wait_until(idle_after("hello"), WAIT_S)
    updates = session.updates()
    tap.inject(Frame(resync=gw.Resync(session_id=session.id, reason="cursor too old")))
    async with asyncio.timeout(WAIT_S):
        async for update in updates:
            if isinstance(update, HistoryLoaded):
                assert update.replaced
                break
    updates.close()
    assert contiguous_from_zero(session) and assistant_texts(session.events) == ["Echo: hello"]


# -- the connection ------------------------------------------------------------------------------


async def test_a_cut_connection_resumes_with_every_event_exactly_once(
    gateway: GatewayHarness, clients: Clients
) -> None:
    tap = StreamTap()
    client = clients.new(interceptors=[tap])
    watcher = clients.new()
    session_id = await new_session(client)
    session = await client.open_session(session_id)
    observer = await watcher.open_session(session_id)
    seen: list[int] = []

    async def collect() -> None:
        async for update in session.updates():
            if isinstance(update, EventAppended):
                seen.append(update.event.seq)

    collector = asyncio.create_task(collect())
    held = await generating(gateway, session)
    reconnect = tap.hold_connect()
    cutting = asyncio.create_task(client.reconnect(within=3 * WAIT_S))
    (resume,) = await reconnect.arrived()  # cut; the new Connect waits
    held.release()  # events flow while the connection is down
    await session.prompt("more", PromptMode.QUEUE)
    await observer.wait_until(idle_after("more"), WAIT_S)
    resume.release()
    assert await asyncio.wait_for(cutting, 3 * WAIT_S) == 1
    await session.wait_until(lambda s: s.last_seq == observer.last_seq, WAIT_S)
    await session.wait_until(idle_after("more"), WAIT_S)
    await matches_the_log(clients, session)
    collector.cancel()
    # Every event after the open was announced once, in order.
    assert seen == list(range(session.last_seq + 1))


async def test_a_restarted_gateway_loses_no_event(
    gateway: GatewayHarness, clients: Clients
) -> None:
    client = clients.new()
    session_id = await new_session(client)
    session = await client.open_session(session_id)
    await session.prompt("before")
    await session.wait_until(idle_after("before"), WAIT_S)
    held = await generating(gateway, session)
    await gateway.stack.stop_service("gateway")
    held.release()  # the turn goes on and is logged while the gateway is down
    await asyncio.wait_for(held.ended.wait(), WAIT_S)
    await gateway.stack.start_service("gateway")
    await session.wait_until(lambda s: client.connected and client.generation >= 1, WAIT_S)
    await session.wait_until(idle_with_turn_ended(2), WAIT_S)
    await session.prompt("after")
    await session.wait_until(idle_after("after"), WAIT_S)
    await matches_the_log(clients, session)


async def test_a_gateway_that_never_answers_ends_the_client_after_the_backoff() -> None:
    client = AgentHostClient(
        "127.0.0.1:1", ALICE, backoff=Backoff(initial_s=0.01, max_s=0.02, max_attempts=2)
    )
    try:
        with pytest.raises(TransportError):
            await client.connect(within=WAIT_S)
        assert client.generation == 0  # nothing was confirmed: no generation to supersede
    finally:
        await client.close()


async def test_heartbeats_keep_a_quiet_stream_and_silence_reconnects(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, heartbeat_s=0.05) as harness:
        seen: list[Frame] = []
        client = AgentHostClient(harness.address, ALICE, idle_timeout=5.0)
        try:
            remove = client.add_listener(seen.append)
            await client.connect()
            await client.wait_for(lambda: client.heartbeats >= 3, WAIT_S)
            assert client.connected and client.generation == 0
            session_id = await new_session(client)
            await client.wait_for(
                lambda: any(
                    f.HasField("session_added") and f.session_added.summary.id == session_id
                    for f in seen
                ),
                WAIT_S,
            )
            remove()
        finally:
            await client.close()
    async with running_gateway(tmp_path / "quiet", heartbeat_s=30.0) as harness:
        # No heartbeat within the idle timeout: the client takes the stream
        # for dead and reconnects.
        client = AgentHostClient(harness.address, ALICE, idle_timeout=0.3)
        try:
            await client.connect()
            await client.wait_for(lambda: client.connects >= 2, WAIT_S)
            assert client.generation >= 1
        finally:
            await client.close()


async def test_frames_that_arrive_before_the_session_is_opened_are_adopted(
    clients: Clients,
) -> None:
    tap = StreamTap()
    client = clients.new(interceptors=[tap])
    session_id = await new_session(client)
    await client.connect()
    # A frame about the session, newer than anything its open will read, comes
    # before any session object exists for it.
    frame = Frame(
        session_projection=gw.SessionProjection(session_id=session_id, key="plan", seq=1000)
    )
    frame.session_projection.value.struct_value.update({"active": True})
    tap.inject(frame)
    await client.wait_for(lambda: client.frames >= 1, WAIT_S)
    session = await client.open_session(session_id)
    entry = session.projections.entry("plan")
    assert entry is not None and entry.seq == 1000 and entry.value == {"active": True}
