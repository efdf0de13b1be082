"""From an append to the frame a client gets: 100 gateway `Connect` streams
of one account against 1, p99, in the same run.

An event is appended straight to the session log (as the runtime does);
the gateway follows the log and fans the `session_event` frame out to every
connection of the session's account. Latency runs from the start of the
append call to each stream's receipt of the frame. Rounds alternate 1 and
N streams (each opened for its round), so both see the same load."""

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
from bench.ratio import Figure, Target, latency_side, percentile

NAME = "stream_fanout"
FRAME_TIMEOUT_S = 30.0


class Arrivals:
    """When each stream got the frame of each seq; wakes whoever waits for
    a seq once every stream has it."""

    def __init__(self, streams: int) -> None:
        self.streams = streams
        self.times: dict[int, list[float]] = defaultdict(list)
        self.complete: dict[int, asyncio.Event] = defaultdict(asyncio.Event)

    def record(self, seq: int) -> None:
        self.times[seq].append(time.perf_counter())
        if len(self.times[seq]) == self.streams:
            self.complete[seq].set()


async def _listen(
    stack: Stack, client_id: str, session_id: str, arrivals: Arrivals, ready: asyncio.Event
) -> None:
    call = stack.gateway.Connect(gw.ConnectRequest(client_id=client_id, generation=0))
    with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
        async for frame in call:
            kind = frame.WhichOneof("frame")
            if kind == "connected":
                ready.set()  # attached: live frames from here on
            elif kind == "session_event" and frame.session_event.session_id == session_id:
                arrivals.record(frame.session_event.seq)
    call.cancel()


async def _round(
    stack: Stack, session_id: str, streams: int, appends: int, tag: str
) -> list[float]:
    arrivals = Arrivals(streams)
    readies = [asyncio.Event() for _ in range(streams)]
    listeners = [
        _listen(stack, f"bench-{tag}-{i}", session_id, arrivals, ready)
        for i, ready in enumerate(readies)
    ]
    answer = conversation(1)[2]  # an assistant message: no turn to keep open

    async def first_seq() -> int:
        return (await stack.log.get_session(session_id)).last_seq + 1

    async def publish(seq: int) -> None:
        await stack.log.append(session_id, [answer])

    return await _timed_fanout(listeners, readies, arrivals, first_seq, appends, publish)


async def _timed_fanout(
    listeners: Sequence[Coroutine[Any, Any, None]],
    readies: Sequence[asyncio.Event],
    arrivals: Arrivals,
    first_seq: Callable[[], Awaitable[int]],
    count: int,
    publish: Callable[[int], Awaitable[None]],
) -> list[float]:
    """Run the listeners; once each is ready, publish `count` seqs one at a
    time, each once every listener got the one before: the latency from
    each publish to each listener's receipt."""
    tasks = [asyncio.create_task(listener) for listener in listeners]
    latencies: list[float] = []
    try:
        async with asyncio.timeout(FRAME_TIMEOUT_S):
            await asyncio.gather(*(r.wait() for r in readies))
        first = await first_seq()
        for seq in range(first, first + count):
            started = time.perf_counter()
            await publish(seq)
            async with asyncio.timeout(FRAME_TIMEOUT_S):
                await arrivals.complete[seq].wait()
            latencies.extend(t - started for t in arrivals.times[seq])
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
                        arrivals.record(int.from_bytes(message[:4], "big"))
            call.cancel()

        async def first_seq() -> int:
            return 0

        async def publish(seq: int) -> None:
            for queue in self.queues:
                queue.put_nowait(seq.to_bytes(4, "big") + payload)

        listeners = [listen(i, ready) for i, ready in enumerate(readies)]
        return await _timed_fanout(listeners, readies, arrivals, first_seq, messages, publish)


async def _bare_floor(sizes: Sizes, payload: bytes) -> tuple[list[float], list[float]]:
    """p99 latencies of the bare fan-out to N streams and to 1, interleaved."""
    fanout = BareFanout()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([fanout.handler()])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    many: list[float] = []
    one: list[float] = []
    try:
        for index in range(sizes.stream_rounds):
            pair = [(sizes.streams, many), (1, one)]
            for streams, into in pair if index % 2 == 0 else reversed(pair):
                into.extend(await fanout.round(channel, streams, sizes.stream_appends, payload))
    finally:
        await channel.close()
        await server.stop(None)
    return many, one


async def run(sizes: Sizes, data_dir: Path) -> Figure:
    async with running_stack(data_dir) as stack:
        session_id = await gateway_session(stack)
        await _round(stack, session_id, sizes.streams, sizes.stream_appends, "warm")
        many: list[float] = []
        one: list[float] = []
        for index in range(sizes.stream_rounds):
            pair = [(sizes.streams, many), (1, one)]
            for streams, into in pair if index % 2 == 0 else reversed(pair):
                tag = f"{index}-{streams}"
                into.extend(await _round(stack, session_id, streams, sizes.stream_appends, tag))
    event = gw.SessionEvent(session_id=session_id, event=conversation(1)[2])
    frame = gw.ConnectResponse(session_event=event)
    bare_many, bare_one = await _bare_floor(sizes, frame.SerializeToString())
    p99 = {
        name: percentile(side, 99) * 1e3
        for name, side in [
            ("many", many),
            ("one", one),
            ("bare_many", bare_many),
            ("bare_one", bare_one),
        ]
    }
    floor = (
        f"floor: a bare grpc.aio server stream sending one frame-sized message to "
        f"{sizes.streams} streams read in this process, p99 {p99['bare_many']:.3g} ms, to 1 "
        f"stream {p99['bare_one']:.3g} ms: the fan-out alone adds "
        f"{p99['bare_many'] - p99['bare_one']:.3g} ms (the figure adds "
        f"{p99['many'] - p99['one']:.3g} ms)"
    )
    return Figure(
        name=f"append to client frame, {sizes.streams} streams",
        compared="p99",
        unit="ms",
        measured=latency_side(f"{sizes.streams} Connect streams of one account", many, "p99"),
        baseline=latency_side("1 Connect stream", one, "p99"),
        target=Target("<=", 2.0, absolute=20.0),
        notes=(
            "append straight to the session log; frames relayed by the gateway",
            floor,
        ),
        details={"bare_fanout_added_p99_ms": p99["bare_many"] - p99["bare_one"]},
    )
