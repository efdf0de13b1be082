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
from pathlib import Path

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw

from bench.harness import Sizes, Stack, conversation, gateway_session, running_stack
from bench.ratio import Figure, Target, latency_side

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
    tasks = [
        asyncio.create_task(_listen(stack, f"bench-{tag}-{i}", session_id, arrivals, ready))
        for i, ready in enumerate(readies)
    ]
    latencies: list[float] = []
    try:
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), FRAME_TIMEOUT_S)
        last_seq = (await stack.log.get_session(session_id)).last_seq
        answer = conversation(1)[2]  # an assistant message: no turn to keep open
        for seq in range(last_seq + 1, last_seq + 1 + appends):
            started = time.perf_counter()
            await stack.log.append(session_id, [answer])
            await asyncio.wait_for(arrivals.complete[seq].wait(), FRAME_TIMEOUT_S)
            latencies.extend(t - started for t in arrivals.times[seq])
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return latencies


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
    return Figure(
        name=f"append to client frame, {sizes.streams} streams",
        compared="p99",
        unit="ms",
        measured=latency_side(f"{sizes.streams} Connect streams of one account", many, "p99"),
        baseline=latency_side("1 Connect stream", one, "p99"),
        target=Target("<=", 2.0, absolute=20.0),
        notes=("append straight to the session log; frames relayed by the gateway",),
    )
