"""The embedded stack for tests that talk to the internal services directly:
session log, plan mode and runtime stubs, a scripted built-in model, and a
switch that makes plan mode's appends to the session log fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from agenthost.planmode.v1 import plan_mode_pb2_grpc
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.runtime.v1 import runtime_pb2_grpc

from agenthost_core.folds import Question
from services.agentruntime.models.base import ModelAdapter
from services.agentruntime.models.builtin import BuiltinAdapter
from services.agentruntime.models.catalog import ModelCatalog
from services.embedded import EmbeddedStack
from services.planmode.tests.failing_log import AppendOutage
from services.sessionlog.client import SessionLogClient
from services.sessionlog.port import Event, SessionLogPort

WAIT_S = 10.0


@dataclass
class Stack:
    embedded: EmbeddedStack
    # Plan mode's appends to the session log go through this switch.
    plan_log_outage: AppendOutage | None = None
    _channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)

    def _channel(self, name: str) -> grpc.aio.Channel:
        if name not in self._channels:
            self._channels[name] = self.embedded.channel(name)
        return self._channels[name]

    @property
    def log(self) -> SessionLogClient:
        return SessionLogClient(self._channel("sessionlog"))

    @property
    def runtime(self) -> runtime_pb2_grpc.AgentRuntimeServiceStub:
        return runtime_pb2_grpc.AgentRuntimeServiceStub(self._channel("agentruntime"))

    @property
    def plan(self) -> plan_mode_pb2_grpc.PlanModeServiceStub:
        return plan_mode_pb2_grpc.PlanModeServiceStub(self._channel("planmode"))

    async def restart(self, name: str) -> None:
        """Restart one service on its address; returns once the test's channel
        to it is connected again (until then it may hold the stopped service's
        refused connection in back-off, and a call would fail on that)."""
        await self.embedded.restart(name)
        await asyncio.wait_for(self._channel(name).channel_ready(), WAIT_S)

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        await self.embedded.stop()

    async def wait_idle(self, session_id: str) -> None:
        """Follow the runtime's status stream until the session is idle."""
        stream = self.runtime.WatchStatus(
            rt.WatchStatusRequest(session_id=session_id), wait_for_ready=True
        )
        async with asyncio.timeout(WAIT_S):
            async for reply in stream:
                if not reply.status.running:
                    stream.cancel()
                    return

    async def next_question(self, session_id: str, after_seq: int = -1) -> Question:
        """The first question asked after `after_seq`, followed in the log."""
        async with asyncio.timeout(WAIT_S):
            async for item in self.log.subscribe(session_id, after_seq=after_seq):
                if isinstance(item, Event) and item.HasField("question_asked"):
                    return Question.from_event(item.question_asked)
        raise AssertionError("the log subscription ended")


@asynccontextmanager
async def running_stack(
    data_dir: Path,
    *,
    model: ModelAdapter | ModelCatalog | None = None,
    with_plan_mode: bool = True,
) -> AsyncIterator[Stack]:
    stack = Stack(
        EmbeddedStack(data_dir, port_override=0, model=model, with_plan_mode=with_plan_mode)
    )

    def with_outage(log: SessionLogPort) -> SessionLogPort:
        stack.plan_log_outage = AppendOutage(log)
        return stack.plan_log_outage

    stack.embedded.wrap_plan_log = with_outage
    if model is None:
        stack.embedded.model = BuiltinAdapter()
    await stack.embedded.start()
    try:
        yield stack
    finally:
        await stack.close()
