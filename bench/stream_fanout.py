"""From an append to the frame a client gets, p99: 100 gateway `Connect`
streams of one account on one session, and 100 sessions of one account with
a stream each (a client per session, as 100 browser tabs would be). Both
against their floor in the same run: 1 stream's p99 plus what a bare
grpc.aio fan-out to the same number of readers adds over one reader
(`BareFanout`: what sending one message to 100 streams costs at all in
this process); regression guards at 1.3x (one session) and 1.5x (100).

An event is appended straight to the session log (as the runtime does);
the gateway follows the log and fans the `session_event` frame out to every
connection of the session's account. Latency runs from the start of the
append call to each stream's receipt of the frame. Rounds take turns among
the five kinds (the three of the gateway, each opened for its round, and
the bare fan-out to 100 readers and to 1), so all see the same load."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw

from bench.harness import Sizes, Stack, conversation, gateway_session, running_stack
from bench.ratio import Figure, Side, Target, latency_side, percentile

NAME = "stream_fanout"
FRAME_TIMEOUT_S = 30.0

# A frame as the bench tells it apart: (session id, seq).
Key = tuple[str, int]
# Publishes step `i` of a round: the key of the frame it causes, and the
# streams whose latency counts (None: every stream's).
Publish = Callable[[int], Awaitable[tuple[Key, Sequence[int] | None]]]


class Arrivals:
    """When each stream got each frame; wakes whoever waits for a frame
    once every stream has it."""

    def __init__(self, streams: int) -> None:
        self.streams = streams
        self.times: dict[Key, dict[int, float]] = defaultdict(dict)
        self.complete: dict[Key, asyncio.Event] = defaultdict(asyncio.Event)

    def record(self, key: Key, stream: int) -> None:
        got = self.times[key]
        got[stream] = time.perf_counter()
        if len(got) == self.streams:
            self.complete[key].set()


async def _listen(
    stack: Stack,
    stream: int,
    request: gw.ConnectRequest,
    arrivals: Arrivals,
    ready: asyncio.Event,
) -> None:
    call = stack.gateway.Connect(request)
    with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
        async for frame in call:
            kind = frame.WhichOneof("frame")
            if kind == "connected":
                ready.set()  # attached: live frames from here on
            elif kind == "session_event":
                arrivals.record((frame.session_event.session_id, frame.session_event.seq), stream)
    call.cancel()


async def fanout_round(
    stack: Stack, sessions: Sequence[str], streams: int, appends: int, tag: str
) -> list[float]:
    """`streams` Connect streams of the account, each a client of one of
    `sessions` in turn (it resumes that session from its end, as a client
    showing it does); each step appends one event to the next session.
    The latency of a step is counted at the streams of its session, and
    the next step waits until every stream has the frame (every stream of
    the account gets every session's frames)."""
    arrivals = Arrivals(streams)
    readies = [asyncio.Event() for _ in range(streams)]
    ends = [(await stack.log.get_session(s)).last_seq for s in sessions]
    watching = [i % len(sessions) for i in range(streams)]
    listeners = [
        _listen(
            stack,
            i,
            gw.ConnectRequest(
                client_id=f"bench-{tag}-{i}",
                generation=0,
                cursors={sessions[watching[i]]: ends[watching[i]]},
            ),
            arrivals,
            ready,
        )
        for i, ready in enumerate(readies)
    ]
    answer = conversation(1)[2]  # an assistant message: no turn to keep open

    async def publish(step: int) -> tuple[Key, Sequence[int] | None]:
        index = step % len(sessions)
        appended = await stack.log.append(sessions[index], [answer])
        owners = None if len(sessions) == 1 else [i for i, w in enumerate(watching) if w == index]
        return (sessions[index], appended.last_seq), owners

    return await _timed_fanout(listeners, readies, arrivals, appends, publish)


async def _timed_fanout(
    listeners: Sequence[Coroutine[Any, Any, None]],
    readies: Sequence[asyncio.Event],
    arrivals: Arrivals,
    count: int,
    publish: Publish,
) -> list[float]:
    """Run the listeners; once each is ready, publish `count` steps one at
    a time, each once every listener got the one before: the latency from
    each publish to each counted listener's receipt."""
    tasks = [asyncio.create_task(listener) for listener in listeners]
    latencies: list[float] = []
    try:
        async with asyncio.timeout(FRAME_TIMEOUT_S):
            await asyncio.gather(*(r.wait() for r in readies))
        for step in range(count):
            started = time.perf_counter()
            key, owners = await publish(step)
            async with asyncio.timeout(FRAME_TIMEOUT_S):
                await arrivals.complete[key].wait()
            times = arrivals.times[key]
            latencies.extend(times[i] - started for i in (times if owners is None else owners))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return latencies


class BareFanout:
    """The floor of a fan-out in this process: a bare grpc.aio server stream
    that sends each published message to every open stream, read by
    clients in this process as the bench's streams are. No log, no gateway:
    only the sending and reading of one message per stream."""

    METHOD = "/bench.Fanout/Stream"

    def __init__(self) -> None:
        self.queues: set[asyncio.Queue[bytes]] = set()

    def handler(self) -> grpc.GenericRpcHandler:
        async def stream(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
            queue: asyncio.Queue[bytes] = asyncio.Queue()
            self.queues.add(queue)
            try:
                yield b"attached"
                while True:
                    yield await queue.get()
            finally:
                self.queues.discard(queue)

        handler = grpc.unary_stream_rpc_method_handler(stream)
        return grpc.method_handlers_generic_handler("bench.Fanout", {"Stream": handler})

    async def round(
        self, channel: grpc.aio.Channel, streams: int, messages: int, payload: bytes
    ) -> list[float]:
        arrivals = Arrivals(streams)
        readies = [asyncio.Event() for _ in range(streams)]

        async def listen(index: int, ready: asyncio.Event) -> None:
            call = channel.unary_stream(self.METHOD)(b"")
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                async for message in call:
                    if message == b"attached":
                        ready.set()
                    else:
                        arrivals.record(("", int.from_bytes(message[:4], "big")), index)
            call.cancel()

        async def publish(step: int) -> tuple[Key, Sequence[int] | None]:
            for queue in self.queues:
                queue.put_nowait(step.to_bytes(4, "big") + payload)
            return ("", step), None

        listeners = [listen(i, ready) for i, ready in enumerate(readies)]
        return await _timed_fanout(listeners, readies, arrivals, messages, publish)


@contextlib.asynccontextmanager
async def _bare_server() -> AsyncIterator[tuple[BareFanout, grpc.aio.Channel]]:
    fanout = BareFanout()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([fanout.handler()])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield fanout, channel
    finally:
        await channel.close()
        await server.stop(None)


async def run(sizes: Sizes, data_dir: Path) -> list[Figure]:
    async with running_stack(data_dir) as stack, _bare_server() as (fanout, channel):
        session_id = await gateway_session(stack)
        spread = [await gateway_session(stack) for _ in range(sizes.streams)]
        frame = gw.ConnectResponse(
            session_event=gw.SessionEvent(session_id=session_id, event=conversation(1)[2])
        )
        payload = frame.SerializeToString()
        await fanout_round(stack, [session_id], sizes.streams, sizes.stream_appends, "warm")
        await fanout.round(channel, sizes.streams, sizes.stream_appends, payload)
        many: list[float] = []
        one: list[float] = []
        each: list[float] = []
        bare_many: list[float] = []
        bare_one: list[float] = []

        def gateway_kind(
            sessions: list[str], streams: int
        ) -> Callable[[str], Awaitable[list[float]]]:
            return lambda tag: fanout_round(stack, sessions, streams, sizes.stream_appends, tag)

        def bare_kind(streams: int) -> Callable[[str], Awaitable[list[float]]]:
            return lambda tag: fanout.round(channel, streams, sizes.stream_appends, payload)

        kinds = [
            (gateway_kind([session_id], sizes.streams), many),
            (gateway_kind([session_id], 1), one),
            (gateway_kind(spread, sizes.streams), each),
            (bare_kind(sizes.streams), bare_many),
            (bare_kind(1), bare_one),
        ]
        for index in range(sizes.stream_rounds):
            turn = index % len(kinds)  # each kind goes first in turn
            for n, (measure, into) in enumerate(kinds[turn:] + kinds[:turn]):
                into.extend(await measure(f"{index}-{n}"))
    p99 = {
        name: percentile(side, 99) * 1e3
        for name, side in [
            ("many", many),
            ("one", one),
            ("each", each),
            ("bare_many", bare_many),
            ("bare_one", bare_one),
        ]
    }
    # The floor of the figure: the one stream's path, plus what a fan-out to
    # the same readers adds at all in this process (the bare one's p99 to N
    # readers less its p99 to 1).
    added = p99["bare_many"] - p99["bare_one"]
    floor = Side(
        f"1 Connect stream p99 {p99['one']:.3g} ms + what a bare grpc.aio server stream adds "
        f"sending one frame-sized message to {sizes.streams} readers in this process rather "
        f"than 1 ({p99['bare_many']:.3g} - {p99['bare_one']:.3g} ms)",
        p99["one"] + added,
        samples=len(one) + len(bare_many) + len(bare_one),
    )
    single = (
        f"the gateway's fan-out adds {p99['many'] - p99['one']:.3g} ms to one stream's p99, "
        f"the bare one {added:.3g} ms"
    )
    relayed = "append straight to the session log; frames relayed by the gateway"
    details = {
        "one_stream_p99_ms": p99["one"],
        "bare_one_p99_ms": p99["bare_one"],
        "bare_fanout_added_p99_ms": p99["bare_many"] - p99["bare_one"],
    }
    return [
        Figure(
            name=f"append to client frame, {sizes.streams} streams",
            compared="p99",
            unit="ms",
            measured=latency_side(f"{sizes.streams} Connect streams of one account", many, "p99"),
            baseline=floor,
            target=Target("<=", 1.3),
            notes=(relayed, single),
            details=details,
        ),
        Figure(
            name=f"append to client frame, {sizes.streams} sessions with a stream each",
            compared="p99",
            unit="ms",
            measured=latency_side(
                f"{sizes.streams} sessions of one account, a Connect stream resuming each; "
                "the latency at the appended session's stream",
                each,
                "p99",
            ),
            baseline=floor,
            target=Target("<=", 1.5),
            notes=(
                relayed,
                "every stream of the account gets every session's frames: the next append "
                "waits for all of them",
            ),
            details=details,
        ),
    ]
