"""Channels to internal services spread calls over every address a peer's
name resolves to (round_robin), as a headless Service's DNS name gives them."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from services.common.client import open_channel

CALLS = 200
# Replica a's health, and replica b's.
STATUSES = (health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING)


@pytest.fixture
async def replicas() -> AsyncIterator[list[str]]:
    """Two real servers that tell themselves apart by their health."""
    servers, addresses = [], []
    for status in STATUSES:
        server = grpc.aio.server()
        servicer = health.aio.HealthServicer()
        await servicer.set("", status)
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        addresses.append(f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}")
        await server.start()
        servers.append(server)
    yield addresses
    for server in servers:
        await server.stop(None)


async def which_replica(stub: health_pb2_grpc.HealthStub) -> int:
    reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
    return int(reply.status)


async def test_calls_through_one_channel_reach_every_replica(replicas: list[str]) -> None:
    target = "ipv4:" + ",".join(replicas)  # one name, two addresses
    channel = open_channel(target)
    try:
        stub = health_pb2_grpc.HealthStub(channel)
        served: Counter[int] = Counter()
        for _ in range(CALLS):
            served[await which_replica(stub)] += 1
            if len(served) == 2:
                break
        assert set(served) == set(STATUSES), served
    finally:
        await channel.close()
