"""The session-log service as a process: signals, crashes and restarts."""

from __future__ import annotations

import asyncio
import itertools
import signal
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.client import open_channel
from services.sessionlog.client import SessionLogClient
from services.sessionlog.port import Event
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


@dataclass(frozen=True)
class Batch:
    session_id: str
    key: str
    size: int

    def ids(self) -> list[str]:
        """Each id names its batch and the batch's size, so a partial batch shows."""
        return [f"{self.key}-{n}of{self.size}" for n in range(self.size)]


# The batches a writer sends in one round, given (writer, round).
Rounds = Callable[[int, int], list[Batch]]


async def test_kill_9_during_appends_loses_no_acknowledged_event(
    service: ServiceProcess,
) -> None:
    """Four writers on one session."""

    def rounds(writer: int, round_: int) -> list[Batch]:
        return [Batch("s", f"w{writer}-b{round_}", BATCH)]

    acknowledged = await _kill_during_appends(service, ["s"], 4, rounds, enough=40)
    await _check_after_restart(service, ["s"], acknowledged)


async def test_kill_9_during_group_commits_loses_no_acknowledged_batch_and_none_is_partial(
    service: ServiceProcess,
) -> None:
    """Sixteen writers, each on a session of its own and all on a shared one:
    the log commits their appends in waves, and it is killed mid-wave."""
    writers = 16
    sessions = ["shared", *(f"own{w}" for w in range(writers))]

    def rounds(writer: int, round_: int) -> list[Batch]:
        return [
            Batch(f"own{writer}", f"w{writer}-r{round_}-own", 1 + (writer + round_) % 4),
            Batch("shared", f"w{writer}-r{round_}-shared", 1 + (writer * round_) % 3),
        ]

    acknowledged = await _kill_during_appends(service, sessions, writers, rounds, enough=200)
    await _check_after_restart(service, sessions, acknowledged)


async def _kill_during_appends(
    service: ServiceProcess, sessions: list[str], writers: int, rounds: Rounds, enough: int
) -> dict[str, tuple[str, int]]:
    """Writers append until `enough` batches are acknowledged; then the log is
    killed (SIGKILL) and started again on the same address. The appends in
    flight are sent again by the client and answered by the new process.
    Returns every acknowledged event id with its session and seq."""
    channel = open_channel(await service.start())
    client = SessionLogClient(channel)
    await wait_for_health(channel, SERVING)
    acknowledged: dict[str, tuple[str, int]] = {}
    batches: set[str] = set()
    reached, killed = asyncio.Event(), asyncio.Event()

    async def send(batch: Batch) -> None:
        events = [user(i, event_id=i) for i in batch.ids()]
        result = await client.append(batch.session_id, events)
        for event_id, seq in zip(batch.ids(), result.seqs, strict=True):
            acknowledged[event_id] = (batch.session_id, seq)
        batches.add(batch.key)
        if len(batches) >= enough:
            reached.set()

    async def writer(worker: int) -> None:
        for round_ in itertools.count():
            for batch in rounds(worker, round_):
                if killed.is_set():
                    return  # no new append once the log was killed
                await send(batch)

    for session_id in sessions:  # durable before the kill: a created session is lazy
        await client.create_session(session_id, "/w")
        await send(Batch(session_id, f"first-{session_id}", 1))
    tasks = [asyncio.create_task(writer(w)) for w in range(writers)]
    await asyncio.wait_for(reached.wait(), 60)
    service.kill()  # SIGKILL while the writers are mid-append
    killed.set()
    await service.start()
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    await channel.close()
    return acknowledged


async def _check_after_restart(
    service: ServiceProcess, sessions: list[str], acknowledged: dict[str, tuple[str, int]]
) -> None:
    channel = open_channel(service.address)
    client = SessionLogClient(channel)
    try:
        await wait_for_health(channel, SERVING)
        present: dict[str, tuple[str, int]] = {}
        for session_id in sessions:
            events = await _read_whole(client, session_id)
            assert [e.seq for e in events] == list(range(len(events))), "seq has a gap"
            present.update({e.id: (session_id, e.seq) for e in events})
        lost = {i for i, at in acknowledged.items() if present.get(i) != at}
        assert not lost, f"acknowledged events lost or moved: {sorted(lost)[:5]}"
        assert not _partial_batches(present), "a batch was written partially"
    finally:
        await channel.close()


def _partial_batches(event_ids: Iterable[str]) -> list[str]:
    """Keys of the batches not all of whose events are present."""
    found: Counter[str] = Counter()
    sizes: dict[str, int] = {}
    for event_id in event_ids:
        key, number = event_id.rsplit("-", 1)
        found[key] += 1
        sizes[key] = int(number.split("of")[1])
    return [key for key, count in found.items() if count != sizes[key]]


async def _read_whole(client: SessionLogClient, session_id: str) -> list[Event]:
    events: list[Event] = []
    while True:
        page = await client.read(session_id, from_seq=len(events), limit=1000)
        events += page.events
        if len(page.events) < 1000:
            return events
