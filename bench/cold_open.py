"""The first gateway `OpenSession` after a restart: a big session (100k
events) against a 100-event one, both timed on the same fresh stack.

Each round stops the whole stack and starts a new one on the same data dir
(new ports, new processes' state: caches, loaded agents, projection
memory), warms the client's connections with another session, then opens
the two sessions once each, alternating which goes first. The OS page cache
stays warm (dropping it needs root): this is a process restart, not a
machine reboot."""

from __future__ import annotations

import time
from pathlib import Path

from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.projection.v1 import projection_pb2 as pj
from agenthost.projection.v1 import projection_pb2_grpc as pj_grpc

from bench.harness import CALL_TIMEOUT_S, Sizes, Stack, gateway_session, running_stack
from bench.ratio import Figure, Target, latency_side
from services.common.database import Database

NAME = "cold_open"


async def _open_s(stack: Stack, session_id: str) -> float:
    started = time.perf_counter()
    await stack.gateway.OpenSession(
        gw.OpenSessionRequest(session_id=session_id), timeout=CALL_TIMEOUT_S
    )
    return time.perf_counter() - started


async def _build(sizes: Sizes, data_dir: Path, database: Database | None) -> tuple[str, str, str]:
    async with running_stack(data_dir, database) as stack:
        sessions = (
            await gateway_session(stack, sizes.big_session),
            await gateway_session(stack, sizes.small_session),
            await gateway_session(stack, sizes.small_session),
        )
        await _folded(stack, sessions)
        for session_id in sessions:  # settle every service before the first stop
            await _open_s(stack, session_id)
    return sessions


async def _folded(stack: Stack, sessions: tuple[str, ...]) -> None:
    """Wait until the projection service has folded every session to its
    end, so the stop checkpoints them: the figure is a restart of a settled
    stack, not a projection still folding the 100k events the build wrote
    faster than it follows (the gateway's open would wait out its bound)."""
    channel = stack.stack.channel("projection")
    try:
        projection = pj_grpc.ProjectionServiceStub(channel)
        for session_id in sessions:
            await projection.GetProjection(
                pj.GetProjectionRequest(session_id=session_id), timeout=CALL_TIMEOUT_S
            )
    finally:
        await channel.close()


class ColdOpens:
    """The sessions of one stack's data, built once, and the first opens of
    each restart: of the big session, of the small one."""

    def __init__(self, data_dir: Path, database: Database | None = None) -> None:
        self.data_dir, self.database = data_dir, database
        self.big_s: list[float] = []
        self.small_s: list[float] = []
        self._sessions: tuple[str, str, str] | None = None

    async def build(self, sizes: Sizes) -> None:
        self._sessions = await _build(sizes, self.data_dir, self.database)

    async def restart(self, index: int) -> None:
        """One restart of the stack, and the two first opens (alternating which goes first)."""
        assert self._sessions is not None, "build first"
        big, small, warm = self._sessions
        async with running_stack(self.data_dir, self.database) as stack:
            await _open_s(stack, warm)
            pair = [(big, self.big_s), (small, self.small_s)]
            for session_id, into in pair if index % 2 == 0 else reversed(pair):
                into.append(await _open_s(stack, session_id))


async def first_opens(sizes: Sizes, data_dir: Path) -> tuple[list[float], list[float]]:
    opens = ColdOpens(data_dir)
    await opens.build(sizes)
    for index in range(sizes.restarts):
        await opens.restart(index)
    return opens.big_s, opens.small_s


async def run(sizes: Sizes, data_dir: Path) -> Figure:
    big_s, small_s = await first_opens(sizes, data_dir)
    return Figure(
        name=f"first OpenSession after restart, {sizes.big_session}-event session",
        compared="p50",
        unit="ms",
        measured=latency_side(f"{sizes.big_session}-event session", big_s, "p50"),
        baseline=latency_side(f"{sizes.small_session}-event session", small_s, "p50"),
        target=Target("<=", 1.5),
        notes=(
            f"one sample per restart ({sizes.restarts} restarts): p99 is the worst",
            "the big session was written with batched appends straight to the session log",
        ),
    )
