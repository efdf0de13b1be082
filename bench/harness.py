"""What every benchmark shares: sizes, the bare echo baseline, the running
stack and the sessions it is measured on. Only public surfaces are used
(EmbeddedStack, the gateway's gRPC stubs, SessionLogClient), so the bench
keeps measuring the same thing while the services change behind them."""

from __future__ import annotations

import asyncio
import gc
import itertools
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.sessionlog.v1 import events_pb2 as ev

from bench.ratio import (
    Call,
    Figure,
    RoundResult,
    Side,
    Target,
    interleaved,
    rate_side,
)
from clients.sdk.auth import authorized_channel
from services.agentruntime.models.builtin import BuiltinAdapter
from services.common.database import Database
from services.common.heap import freeze_what_serving_built
from services.embedded import EmbeddedStack
from services.sessionlog.client import SessionLogClient


@dataclass(frozen=True)
class Sizes:
    """How much each benchmark does; FULL for `make bench`, SMOKE for CI."""

    rounds: int  # interleaved rounds of a latency figure
    per_round: int  # sequential calls per round
    rate_rounds: int  # interleaved rounds of a rate figure
    rate_round_s: float  # seconds per rate round
    restarts: int  # restarts measured for the cold open
    big_session: int  # events of the session opened cold
    streams: int  # Connect streams in the fan-out
    stream_rounds: int
    stream_appends: int  # appends per fan-out round
    memory_sessions: int
    memory_events: int
    appenders: int = 16
    batch: int = 100
    small_session: int = 100
    # Events of the compacted session whose next model request is built.
    compacted_session: int = 10_000
    # Sessions the runtime memory figure opens, and after how many it takes its baseline.
    runtime_sessions: int = 10_000
    runtime_first: int = 100
    # Files of the workspace the checkpoint figure snapshots.
    checkpoint_files: int = 10_000
    # Sessions, and events of each, the search figure searches.
    search_sessions: int = 10_000
    search_events: int = 100


FULL = Sizes(
    rounds=10,
    per_round=100,
    rate_rounds=6,
    rate_round_s=2.0,
    restarts=5,
    big_session=100_000,
    streams=100,
    stream_rounds=4,
    stream_appends=50,
    memory_sessions=10_000,
    memory_events=100,
)
SMOKE = Sizes(
    rounds=2,
    per_round=20,
    rate_rounds=2,
    rate_round_s=0.3,
    restarts=1,
    big_session=2_000,
    streams=10,
    stream_rounds=1,
    stream_appends=5,
    memory_sessions=40,
    memory_events=20,
    compacted_session=1_000,
    runtime_sessions=60,
    runtime_first=20,
    checkpoint_files=300,
    search_sessions=50,
    search_events=20,
)

# Generous: a cold open of a big session may take long, and a slow call
# must show in the report, not fail the run.
CALL_TIMEOUT_S = 120.0
# What the gateway figures' notes say of the calls behind them.
IN_PROCESS = (
    "one gRPC call: the gateway reaches plan mode, the session log and the projection "
    "service in-process, as the embedded stack wires its services (services/common/local.py)"
)
# Events per append when building sessions (the log's maximum is 1000).
BUILD_BATCH = 1000


# -- the bare echo baseline ------------------------------------------------------------------------

ECHO_METHOD = "/bench.Echo/Echo"


def _echo_handler() -> grpc.GenericRpcHandler:
    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    handler = grpc.unary_unary_rpc_method_handler(echo)
    return grpc.method_handlers_generic_handler("bench.Echo", {"Echo": handler})


@asynccontextmanager
async def echo_server() -> AsyncIterator[grpc.aio.UnaryUnaryMultiCallable]:
    """A grpc.aio unary echo of raw bytes on loopback, in this process like
    the stack, and the callable that calls it over its own channel."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([_echo_handler()])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield channel.unary_unary(ECHO_METHOD)
    finally:
        await channel.close()
        await server.stop(None)


# -- the stack -------------------------------------------------------------------------------------


@dataclass
class Stack:
    """A running EmbeddedStack with a client's gateway stub and the session
    log client its services use (internal token)."""

    stack: EmbeddedStack
    gateway: gw_grpc.GatewayServiceStub
    log: SessionLogClient
    workdir: Path


@asynccontextmanager
async def running_stack(data_dir: Path, database: Database | None = None) -> AsyncIterator[Stack]:
    """The embedded stack on free loopback ports with the built-in model;
    a second one on the same data dir (and `database`) is a restart. Its
    stores: `database`, else SQLite under `data_dir`."""
    workdir = data_dir / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    stack = _stack(data_dir, database)
    async with _serving(stack, stack.start()):
        gateway_channel = authorized_channel(stack.addresses["gateway"], stack.token())
        log_channel = stack.channel("sessionlog")
        try:
            yield Stack(
                stack,
                gw_grpc.GatewayServiceStub(gateway_channel),
                SessionLogClient(log_channel),
                workdir,
            )
        finally:
            await gateway_channel.close()
            await log_channel.close()


@asynccontextmanager
async def session_log_alone(
    data_dir: Path, database: Database | None = None
) -> AsyncIterator[SessionLogClient]:
    """The session log service as the stack runs it, with no other service
    started: nothing follows its appends, so set beside the stack's figure
    it shows what the followers sharing the stack's loop (the projection
    service and the gateway's hub) take from it."""
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    stack = _stack(data_dir, database)
    async with _serving(stack, stack.start_service("sessionlog")):
        channel = stack.channel("sessionlog")
        try:
            yield SessionLogClient(channel)
        finally:
            await channel.close()


def _stack(data_dir: Path, database: Database | None) -> EmbeddedStack:
    # Never the environment's AGENTHOST_DATABASE_URL: a figure says its store.
    return EmbeddedStack(
        data_dir,
        port_override=0,
        model=BuiltinAdapter(),
        database=database or Database.sqlite(data_dir),
    )


@asynccontextmanager
async def _serving(stack: EmbeddedStack, start: Awaitable[None]) -> AsyncIterator[None]:
    """`stack` started by `start`, its heap then frozen as a serving process
    freezes it (serve_until_signalled); stopped, and unfrozen, at the end:
    this process goes on, and the next stack is frozen afresh."""
    try:
        await start
        freeze_what_serving_built()
        yield
    finally:
        await stack.stop()
        gc.unfreeze()


@dataclass(frozen=True)
class AppendRates:
    """The rounds of one append figure: to the session log alone and to the
    embedded stack's, against one baseline."""

    name: str
    appends: str  # what each call is
    alone: Sequence[RoundResult]
    in_stack: Sequence[RoundResult]
    baseline: Side

    def figures(self, alone_at_least: float, in_stack_at_least: float, *notes: str) -> list[Figure]:
        """The two figures, each with its target (rates: measured >= ratio x baseline)."""
        return [
            Figure(
                name=f"{self.name}, session log alone",
                compared="rate",
                unit="events/s",
                measured=rate_side(self.appends, self.alone),
                baseline=self.baseline,
                target=Target(">=", alone_at_least),
                notes=("the session log service alone: nothing follows its appends", *notes),
            ),
            Figure(
                name=f"{self.name}, embedded stack",
                compared="rate",
                unit="events/s",
                measured=rate_side(self.appends, self.in_stack),
                baseline=self.baseline,
                target=Target(">=", in_stack_at_least),
                notes=(
                    "through the session log service's gRPC as EmbeddedStack runs it (not the "
                    "gateway): the projection service and the gateway's hub follow every "
                    "append on its loop",
                    *notes,
                ),
            ),
        ]


class Fences:
    """Request fences of one client: every mutation needs a newer id."""

    def __init__(self, client_id: str = "bench") -> None:
        self.client_id = client_id
        self._ids = itertools.count(1)

    def next(self) -> gw.RequestFence:
        return gw.RequestFence(client_id=self.client_id, generation=0, request_id=next(self._ids))


# -- sessions --------------------------------------------------------------------------------------


def turn(index: int) -> list[ev.Event]:
    """One closed turn of four events: start, user message, answer, end."""
    turn_id = f"t{index}"
    user = ev.UserMessage(
        text=f"question {index}: " + "x" * 80, source=ev.MessageSource(kind=ev.SOURCE_KIND_USER)
    )
    return [
        ev.Event(turn_start=ev.TurnStart(turn_id=turn_id)),
        ev.Event(user_message=user),
        ev.Event(assistant_message=ev.AssistantMessage(text=f"answer {index}: " + "y" * 160)),
        ev.Event(turn_end=ev.TurnEnd(turn_id=turn_id, reason=ev.TURN_END_REASON_COMPLETED)),
    ]


def conversation(events: int, first_turn: int = 0) -> list[ev.Event]:
    """At least `events` events, in whole closed turns (so a resumed agent
    has nothing to repair)."""
    turns = -(-events // 4)
    return [e for i in range(first_turn, first_turn + turns) for e in turn(i)]


async def append_all(log: SessionLogClient, session_id: str, events: Sequence[ev.Event]) -> None:
    for start in range(0, len(events), BUILD_BATCH):
        await log.append(session_id, events[start : start + BUILD_BATCH])


async def gateway_session(stack: Stack, events: int = 0) -> str:
    """A session the client's account owns (made through the gateway), its
    log filled with `events` events straight through the session log."""
    created = await stack.gateway.CreateSession(
        gw.CreateSessionRequest(cwd=str(stack.workdir)), timeout=CALL_TIMEOUT_S
    )
    session_id: str = created.session.id
    if events:
        await append_all(stack.log, session_id, conversation(events))
    return session_id


async def against_echo(call: Call, payload: bytes, sizes: Sizes) -> tuple[list[float], list[float]]:
    """Latencies of `call` and of a bare echo of `payload` (the request's
    bytes, so both carry the same size), interleaved."""
    async with echo_server() as echo:
        return await interleaved(call, lambda: echo(payload), sizes.rounds, sizes.per_round)
