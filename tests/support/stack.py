"""Session log, plan mode and agent runtime as real gRPC services on loopback.

Each service runs in its own host with its own channel, wired together through
their gRPC clients exactly as in a deployment; only the model is a scripted
built-in adapter the test holds. Hosts can be restarted on the same data.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from agenthost.planmode.v1 import plan_mode_pb2_grpc
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.runtime.v1 import runtime_pb2_grpc

from services.agentruntime.models.base import ModelAdapter
from services.agentruntime.models.builtin import BuiltinAdapter
from services.agentruntime.plan_port import RemotePlanMode
from services.agentruntime.service import agent_runtime_service
from services.common.client import open_channel
from services.common.config import ServiceConfig
from services.common.server import ServiceDefinition, ServiceHost
from services.planmode.client import PlanModeClient
from services.planmode.service import plan_mode_service
from services.planmode.tests.failing_log import AppendOutage
from services.sessionlog.client import SessionLogClient
from services.sessionlog.service import session_log_service

WAIT_S = 10.0


@dataclass
class Stack:
    data_dir: Path
    model: ModelAdapter = field(default_factory=BuiltinAdapter)
    with_plan_mode: bool = True
    hosts: dict[str, ServiceHost] = field(default_factory=dict)
    channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)
    # Plan mode's appends to the session log go through this switch.
    plan_log_outage: AppendOutage | None = None
    # A restarted service keeps its address, so the others' channels reconnect.
    addresses: dict[str, str] = field(default_factory=dict)
    # Channels the services use to reach each other (the test has its own).
    internal_channels: list[grpc.aio.Channel] = field(default_factory=list)

    @property
    def log(self) -> SessionLogClient:
        return SessionLogClient(self.channels["sessionlog"])

    @property
    def runtime(self) -> runtime_pb2_grpc.AgentRuntimeServiceStub:
        return runtime_pb2_grpc.AgentRuntimeServiceStub(self.channels["agentruntime"])

    @property
    def plan(self) -> plan_mode_pb2_grpc.PlanModeServiceStub:
        return plan_mode_pb2_grpc.PlanModeServiceStub(self.channels["planmode"])

    async def start(self) -> None:
        await self._start("sessionlog")
        if self.with_plan_mode:
            await self._start("planmode")
        await self._start("agentruntime")

    async def restart(self, name: str) -> None:
        await self._stop(name)
        await self._start(name)

    async def stop(self) -> None:
        for name in reversed(list(self.hosts)):
            await self._stop(name)
        for channel in self.internal_channels:
            await channel.close()

    async def _start(self, name: str) -> None:
        listen = self.addresses.get(name, "127.0.0.1:0")
        host = ServiceHost(
            ServiceConfig(name=name, listen=listen, data_dir=self.data_dir, grace_s=1),
            self._definition(name),
        )
        await host.start()
        self.hosts[name] = host
        self.addresses[name] = host.address
        self.channels[name] = open_channel(host.address)

    async def _stop(self, name: str) -> None:
        await self.channels.pop(name).close()
        await self.hosts.pop(name).stop()

    def _definition(self, name: str) -> ServiceDefinition:
        if name == "sessionlog":
            return session_log_service(self.data_dir / "sessionlog.db")
        log = SessionLogClient(self._internal_channel("sessionlog"))
        if name == "planmode":
            self.plan_log_outage = AppendOutage(log)
            return plan_mode_service(self.data_dir, self.plan_log_outage)
        plan = (
            RemotePlanMode(PlanModeClient(self._internal_channel("planmode")))
            if self.with_plan_mode
            else None
        )
        return agent_runtime_service(log, self.model, plan)

    def _internal_channel(self, name: str) -> grpc.aio.Channel:
        channel = open_channel(self.addresses[name])
        self.internal_channels.append(channel)
        return channel

    # -- conveniences for tests ------------------------------------------------

    async def wait_idle(self, session_id: str) -> None:
        """Follow the runtime's status stream until the session is idle."""
        stream = self.runtime.WatchStatus(rt.WatchStatusRequest(session_id=session_id))
        async with asyncio.timeout(WAIT_S):
            async for reply in stream:
                if not reply.status.running:
                    stream.cancel()
                    return

    async def next_question(self, session_id: str) -> rt.Question:
        stream = self.runtime.WatchQuestions(rt.WatchQuestionsRequest(session_id=session_id))
        async with asyncio.timeout(WAIT_S):
            async for reply in stream:
                if reply.HasField("asked"):
                    stream.cancel()
                    question: rt.Question = reply.asked
                    return question
        raise AssertionError("the question stream ended")


@asynccontextmanager
async def running_stack(data_dir: Path, **options: object) -> AsyncIterator[Stack]:
    stack = Stack(data_dir, **options)  # type: ignore[arg-type]
    async with AsyncExitStack() as cleanup:
        cleanup.push_async_callback(stack.stop)
        await stack.start()
        yield stack
