"""The whole stack behind a gateway, for tests that act as clients."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.projection.v1 import projection_pb2_grpc

from clients.sdk.auth import authorized_channel
from services.agentruntime.models.builtin import BuiltinAdapter
from services.common.config import ServiceConfig
from services.common.server import ServiceHost
from services.embedded import EmbeddedStack
from services.gateway.accounts import TokenStore
from services.gateway.runtimes import RuntimeReplicas
from services.gateway.service import gateway_service
from services.planmode.client import PlanModeClient
from services.sessionlog.client import SessionLogClient
from services.workspace.client import WorkspaceClient

ALICE, BOB = "token-alice", "token-bob"
WAIT_S = 10.0


@dataclass
class Client:
    """One client connection's view: a stub and, once connected, its frames."""

    stub: gw_grpc.GatewayServiceStub
    channel: grpc.aio.Channel
    client_id: str
    generation: int = 0
    request_id: int = 0
    # Every frame received, in order; `next_frame` moves a cursor over it.
    received: list[gw.ConnectResponse] = field(default_factory=list)
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _cursor: int = 0
    _drained: int = 0
    _reader: asyncio.Task[None] | None = None
    _call: grpc.aio.UnaryStreamCall | None = None

    def fence(self) -> gw.RequestFence:
        self.request_id += 1
        return gw.RequestFence(
            client_id=self.client_id, generation=self.generation, request_id=self.request_id
        )

    async def connect(self, cursors: dict[str, int] | None = None) -> None:
        self._call = self.stub.Connect(
            gw.ConnectRequest(
                client_id=self.client_id, generation=self.generation, cursors=cursors or {}
            )
        )
        first = await asyncio.wait_for(self._call.read(), WAIT_S)
        assert first.HasField("connected")
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._call is not None
        try:
            # read(), as connect() began: grpc.aio refuses a call read both ways.
            while (frame := await self._call.read()) is not grpc.aio.EOF:
                self.received.append(frame)
                self._arrived.set()
        except (grpc.aio.AioRpcError, asyncio.CancelledError):
            return

    async def disconnect(self) -> None:
        if self._call is not None:
            self._call.cancel()
        if self._reader is not None:
            await asyncio.wait([self._reader])
        self._call = self._reader = None

    async def next_frame(
        self, match: Callable[[gw.ConnectResponse], bool], *, seen_or_next: bool = False
    ) -> gw.ConnectResponse:
        """The next received frame that matches (frames before it are kept);
        with `seen_or_next`, a matching frame already passed over counts too."""
        if seen_or_next:
            for frame in self.received:
                if match(frame):
                    return frame
        async with asyncio.timeout(WAIT_S):
            while True:
                while self._cursor < len(self.received):
                    frame = self.received[self._cursor]
                    self._cursor += 1
                    if match(frame):
                        return frame
                self._arrived.clear()
                await self._arrived.wait()

    def drain(self) -> list[gw.ConnectResponse]:
        """Frames received since the last drain."""
        frames = self.received[self._drained :]
        self._drained = len(self.received)
        return frames


@dataclass
class GatewayHarness:
    stack: EmbeddedStack
    model: BuiltinAdapter
    clients: list[Client] = field(default_factory=list)

    @property
    def address(self) -> str:
        return self.stack.addresses["gateway"]

    def client(self, token: str | None = ALICE, client_id: str = "client-1") -> Client:
        channel = authorized_channel(self.address, token)
        client = Client(gw_grpc.GatewayServiceStub(channel), channel, client_id)
        self.clients.append(client)
        return client

    def client_of(
        self, address: str, token: str | None = ALICE, client_id: str = "client-1"
    ) -> Client:
        """A client of another gateway replica (see `another_gateway`)."""
        channel = authorized_channel(address, token)
        client = Client(gw_grpc.GatewayServiceStub(channel), channel, client_id)
        self.clients.append(client)
        return client

    async def close(self) -> None:
        for client in self.clients:
            await client.disconnect()
            await client.channel.close()


@asynccontextmanager
async def another_gateway(harness: GatewayHarness) -> AsyncIterator[str]:
    """A second gateway replica in front of the same internal services (its
    own channels and hub, as another process would have; its fences shared
    when the stack's database is PostgreSQL); its address."""
    stack = harness.stack
    channels = {name: stack.channel(name) for name in stack.names}
    plan = PlanModeClient(channels["planmode"]) if stack.with_plan_mode else None
    assert stack.tokens is not None
    definition = gateway_service(
        stack.tokens,
        SessionLogClient(channels["sessionlog"]),
        WorkspaceClient(channels["workspace"]),
        RuntimeReplicas(stack.addresses["agentruntime"], stack.dial),
        projection_pb2_grpc.ProjectionServiceStub(channels["projection"]),
        plan,
        database=stack.stores(),
    )
    host = ServiceHost(ServiceConfig(name="gateway-2", data_dir=stack.data_dir), definition)
    await host.start()
    try:
        yield host.address
    finally:
        await host.stop()
        for channel in channels.values():
            await channel.close()


@asynccontextmanager
async def running_gateway(
    data_dir: Path, *, with_plan_mode: bool = True, heartbeat_s: float = 15.0
) -> AsyncIterator[GatewayHarness]:
    model = BuiltinAdapter()
    stack = EmbeddedStack(
        data_dir,
        port_override=0,
        model=model,
        with_plan_mode=with_plan_mode,
        tokens=TokenStore({ALICE: "alice", BOB: "bob"}),
        gateway_heartbeat_s=heartbeat_s,
    )
    await stack.start()
    harness = GatewayHarness(stack, model)
    try:
        yield harness
    finally:
        await harness.close()
        await stack.stop()
