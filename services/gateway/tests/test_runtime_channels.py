"""The gateway closes its channel to a runtime replica nothing leads to any
more (a learned owner whose stream broke, an address the target no longer
resolves to), and dials it afresh should a call need it again. Real gRPC
servers stand at the addresses; only channel states are looked at."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health, health_pb2_grpc

from services.common.client import open_channel
from services.gateway.runtimes import RuntimeReplicas

WAIT_S = 10.0
SHUTDOWN = grpc.ChannelConnectivity.SHUTDOWN


@pytest.fixture
async def addresses() -> AsyncIterator[list[str]]:
    servers, found = [], []
    for _ in range(3):
        server = grpc.aio.server()
        health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
        found.append(f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}")
        await server.start()
        servers.append(server)
    yield found
    for server in servers:
        await server.stop(None)


class Dialled:
    """open_channel, keeping every channel it made per address."""

    def __init__(self) -> None:
        self.channels: dict[str, list[grpc.aio.Channel]] = {}

    def __call__(self, address: str) -> grpc.aio.Channel:
        channel = open_channel(address)
        self.channels.setdefault(address, []).append(channel)
        return channel

    async def closed(self, address: str) -> None:
        async with asyncio.timeout(WAIT_S):
            channel = self.channels[address][-1]
            while (state := channel.get_state()) is not SHUTDOWN:
                await channel.wait_for_state_change(state)


async def test_a_lost_owner_s_channel_is_closed_and_dialled_again_when_needed(
    addresses: list[str],
) -> None:
    target, owner, _ = addresses
    dialled = Dialled()
    replicas = RuntimeReplicas(target, dialled)
    try:
        replicas.stub(target)
        replicas.stub(owner)  # as a call to an owner a replica named does
        replicas.lost(owner)
        await dialled.closed(owner)
        assert dialled.channels[target][-1].get_state() is not SHUTDOWN

        replicas.stub(owner)
        assert len(dialled.channels[owner]) == 2
        assert dialled.channels[owner][-1].get_state() is not SHUTDOWN
    finally:
        await replicas.close()


async def test_a_replica_the_target_no_longer_resolves_to_is_closed(
    addresses: list[str],
) -> None:
    first, second, other = addresses
    dialled = Dialled()
    replicas = RuntimeReplicas(f"ipv4:{first},{second}", dialled)
    try:
        assert await replicas.replicas() == {first, second}
        for address in (first, second):
            replicas.stub(address)  # as the hub follows each replica
        replicas.target = f"ipv4:{first},{other}"  # the name's answer changed
        assert await replicas.replicas() == {first, other}
        await dialled.closed(second)
        assert dialled.channels[first][-1].get_state() is not SHUTDOWN
    finally:
        await replicas.close()
