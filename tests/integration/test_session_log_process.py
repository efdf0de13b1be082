"""The session-log service as a process: signals, crashes and restarts."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.client import open_channel
from services.sessionlog.client import SessionLogClient
from tests.support.events import user
from tests.support.hosts import ServiceProcess, wait_for_health

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
BATCH = 5


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ServiceProcess]:
    process = ServiceProcess("services.sessionlog", tmp_path / "data")
    yield process
    process.kill()


async def test_sigterm_turns_health_not_serving_then_exits(service: ServiceProcess) -> None:
    channel = open_channel(await service.start())
    try:
        await wait_for_health(channel, SERVING)
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
        statuses = [(await watch.read()).status]
        service.signal(signal.SIGTERM)
        async with asyncio.timeout(10):
            while statuses[-1] != NOT_SERVING:
                statuses.append((await watch.read()).status)
        assert statuses[0] == SERVING and statuses[-1] == NOT_SERVING
        assert await service.wait() == 0
    finally:
        await channel.close()


async def test_kill_9_during_appends_loses_no_acknowledged_event(
    service: ServiceProcess,
) -> None:
    channel = open_channel(await service.start())
    client = SessionLogClient(channel)
    await wait_for_health(channel, SERVING)
    await client.create_session("s", "/w")
    acknowledged: list[int] = []
    enough, killed = asyncio.Event(), asyncio.Event()

    async def writer(worker: int) -> None:
        for batch in range(10_000):
            if killed.is_set():
                return  # no new append once the service is gone
            ids = [f"w{worker}-b{batch}-{n}" for n in range(BATCH)]
            try:
                await client.append("s", [user(i, event_id=i) for i in ids])
            except grpc.aio.AioRpcError:
                return  # the service died under us: this batch was not acknowledged
            acknowledged.append(worker * 1_000_000 + batch)
            if len(acknowledged) >= 40:
                enough.set()

    writers = [asyncio.create_task(writer(w)) for w in range(4)]
    await asyncio.wait_for(enough.wait(), 30)
    service.kill()  # SIGKILL while the writers are mid-append
    killed.set()
    await asyncio.wait_for(asyncio.gather(*writers), 30)
    await channel.close()

    channel = open_channel(await service.start())
    client = SessionLogClient(channel)
    try:
        await wait_for_health(channel, SERVING)
        events = (await client.read("s", from_seq=0, limit=1000)).events
        while len(events) % 1000 == 0 and events:
            more = (await client.read("s", from_seq=events[-1].seq + 1, limit=1000)).events
            if not more:
                break
            events += more
        assert [e.seq for e in events] == list(range(len(events))), "seq has a gap"
        present = {e.id for e in events}
        for key in acknowledged:
            worker, batch = divmod(key, 1_000_000)
            assert {f"w{worker}-b{batch}-{n}" for n in range(BATCH)} <= present
        batches: dict[str, int] = {}
        for event_id in present:
            batch_key = event_id.rsplit("-", 1)[0]
            batches[batch_key] = batches.get(batch_key, 0) + 1
        assert set(batches.values()) == {BATCH}, "a batch was written partially"
    finally:
        await channel.close()
