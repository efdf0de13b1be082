"""A subagent's start, p50, against a top-level prompt's: the runtime's
overhead from a `task` call to the child's first model request.

Both sides run on one runtime over the session log as the stack runs it
(its gRPC client, SQLite), the built-in model answering at once. The
baseline is a new top-level session's prompt: from the runtime's Prompt
until its first model request. The measured side is a new subagent: from
the end of the parent's answer that made the `task` call (recorded, the
call judged and run) until the child's first model request (its session
made, its header and settings recorded, its prompt taken, its turn
opened, its request built). Each sample reports its own span (what
happens around it, the parent's other steps, is not timed); rounds of
the two sides alternate, as for every figure. Target: at most 3x."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path

from bench.harness import Sizes, session_log_alone
from bench.ratio import Figure, Target, latency_side
from services.agentruntime.models.base import ModelChunk, ModelRequest
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply, ScriptedToolCall
from services.agentruntime.runtime import AgentRuntime
from services.sessionlog.client import SessionLogClient

NAME = "subagent_start"
WAIT_S = 60.0
Sample = Callable[[], Awaitable[float]]


class TimedModel(BuiltinAdapter):
    """The built-in model, noting when each request arrives and when each
    answer has been streamed whole."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: asyncio.Queue[float] = asyncio.Queue()
        self.answered: asyncio.Queue[float] = asyncio.Queue()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        self.asked.put_nowait(time.perf_counter())
        async for chunk in super().stream(request):
            yield chunk
        self.answered.put_nowait(time.perf_counter())

    def drain(self) -> None:
        for queue in (self.asked, self.answered):
            while not queue.empty():
                queue.get_nowait()


async def run(sizes: Sizes, data_dir: Path) -> Figure:
    folder = data_dir / "workspace"
    folder.mkdir()
    async with session_log_alone(data_dir) as log:
        model = TimedModel()
        runtime = AgentRuntime(log, model, config_dir=data_dir / "config", data_dir=data_dir)
        try:
            sides = Sides(runtime, model, log, str(folder))
            per_round = max(sizes.per_round // 10, 2)
            child_s, top_s = await alternating(
                [sides.child, sides.top_level], sizes.rounds, per_round
            )
        finally:
            await runtime.close()
    return Figure(
        name="a subagent's start: its task call to its first model request",
        compared="p50",
        unit="ms",
        measured=latency_side("task call -> the child's first request", child_s, "p50"),
        baseline=latency_side("top-level Prompt -> its first request", top_s, "p50"),
        target=Target("<=", 3.0),
    )


async def alternating(samples: list[Sample], rounds: int, per_round: int) -> list[list[float]]:
    """Each side's self-reported spans, one round of each in turn (the order
    rotating), after a warm-up round of each."""
    for sample in samples:
        for _ in range(per_round):
            await sample()
    spans: list[list[float]] = [[] for _ in samples]
    for index in range(rounds):
        for offset in range(len(samples)):
            side = (index + offset) % len(samples)
            spans[side] += [await samples[side]() for _ in range(per_round)]
    return spans


class Sides:
    def __init__(
        self, runtime: AgentRuntime, model: TimedModel, log: SessionLogClient, folder: str
    ) -> None:
        self.runtime, self.model, self.log, self.folder = runtime, model, log, folder

    async def top_level(self) -> float:
        self.model.drain()
        summary, _ = await self.log.create_session(None, self.folder)
        self.model.enqueue(ScriptedReply(text="hi"))
        started = time.perf_counter()
        await self.runtime.prompt(summary.id, "hello")
        async with asyncio.timeout(WAIT_S):
            asked = await self.model.asked.get()
        await self._idle(summary.id)
        return asked - started

    async def child(self) -> float:
        self.model.drain()
        summary, _ = await self.log.create_session(None, self.folder)
        task = ScriptedToolCall("task", {"description": "look", "prompt": "look"})
        for reply in (ScriptedReply(tool_calls=[task]), ScriptedReply(text="found")):
            self.model.enqueue(reply)
        self.model.enqueue(ScriptedReply(text="done"))
        await self.runtime.prompt(summary.id, "delegate")
        async with asyncio.timeout(WAIT_S):
            await self.model.asked.get()  # the parent's request
            called = await self.model.answered.get()
            asked = await self.model.asked.get()  # the child's
        await self._idle(summary.id)
        return asked - called

    async def _idle(self, session_id: str) -> None:
        async with asyncio.timeout(WAIT_S):
            async for status in self.runtime.watch_status(session_id):
                if not status.running:
                    return
