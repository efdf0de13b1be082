"""The session log in its own container: a host client through the published
port, a `docker restart` in the middle of appends, and no acknowledged event
lost (gapless seqs, each acknowledged id at its acknowledged seq). Once with
SQLite on the container's disk, once with PostgreSQL in its own container on
the same network."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import grpc
import pytest
from agenthost.sessionlog.v1 import session_log_pb2 as pb
from agenthost.sessionlog.v1 import session_log_pb2_grpc
from testcontainers.core.network import Network

from tests.containers.stack import (
    POSTGRES_DSN,
    PostgresContainer,
    ServiceContainer,
    open_channel,
    wait_serving,
)
from tests.support.events import user

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]

SESSION = "restarted"
BATCH = 3
BEFORE_RESTART = 10  # batches acknowledged before the restart starts
AFTER_RESTART = 10  # and after it has finished
MAX_BATCHES = 5_000
APPEND_DEADLINE_S = 90.0
# What a client sees of a server going away mid-call; the outcome is unknown,
# so the same batch is sent again (idempotent by event id).
RETRYABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
}


async def append_acknowledged(
    channel: grpc.aio.Channel, log: session_log_pb2_grpc.SessionLogServiceStub, batch: int
) -> tuple[list[str], pb.AppendResponse, int]:
    """Append one batch, retrying it (same event ids: idempotent) until acknowledged."""
    ids = [f"b{batch}-{n}" for n in range(BATCH)]
    request = pb.AppendRequest(session_id=SESSION, events=[user(i, event_id=i) for i in ids])
    failures = 0
    while True:
        try:
            reply = await log.Append(request, timeout=10, wait_for_ready=True)
            return ids, reply, failures
        except grpc.aio.AioRpcError as error:
            if error.code() not in RETRYABLE:
                raise
            failures += 1
            # Back off until the channel's connectivity changes (it reconnects
            # by itself), at most a second.
            state = channel.get_state(try_to_connect=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(channel.wait_for_state_change(state), 1.0)


async def read_all(log: session_log_pb2_grpc.SessionLogServiceStub) -> list[tuple[str, int]]:
    events: list[tuple[str, int]] = []
    while True:
        page = await log.ReadEvents(
            pb.ReadEventsRequest(
                session_id=SESSION,
                from_seq=len(events),
                direction=pb.READ_DIRECTION_FORWARD,
                limit=1000,
            ),
            timeout=10,
        )
        if not page.events:
            return events
        events += [(event.id, event.seq) for event in page.events]


@pytest.fixture(params=["sqlite", "postgres"])
def store_env(
    request: pytest.FixtureRequest, network: Network, test_session: str
) -> Iterator[dict[str, str]]:
    """The session log's storage: SQLite in its data folder, or the PostgreSQL
    server of a container on the same network."""
    if request.param == "sqlite":
        yield {}
        return
    image = request.getfixturevalue("postgres_image")
    with PostgresContainer(image, network, test_session):
        yield {"AGENTHOST_SESSIONLOG_DSN": POSTGRES_DSN}


async def test_restart_mid_appends_loses_no_acknowledged_event(
    agenthost_image: str, network: Network, test_session: str, store_env: dict[str, str]
) -> None:
    with ServiceContainer(
        agenthost_image, "sessionlog", network, test_session, env=store_env
    ) as container:
        await wait_serving(container.address)
        docker_container = container.get_wrapped_container()
        started_at = docker_container.attrs["State"]["StartedAt"]
        acknowledged: dict[str, int] = {}
        failures = 0
        spanning = 0  # appends sent before the restart finished, acknowledged after it
        enough_before = asyncio.Event()
        restarted = asyncio.Event()

        async with open_channel(container.address) as channel:
            log = session_log_pb2_grpc.SessionLogServiceStub(channel)
            await log.CreateSession(pb.CreateSessionRequest(session_id=SESSION, cwd="/work"))

            async def appender() -> None:
                nonlocal failures, spanning
                after = 0
                for batch in range(MAX_BATCHES):
                    sent_before_restarted = not restarted.is_set()
                    ids, reply, failed = await append_acknowledged(channel, log, batch)
                    failures += failed
                    spanning += sent_before_restarted and restarted.is_set()
                    assert len(reply.seqs) == len(ids)
                    acknowledged.update(zip(ids, reply.seqs, strict=True))
                    if batch + 1 == BEFORE_RESTART:
                        enough_before.set()
                    if restarted.is_set():
                        after += 1
                        if after == AFTER_RESTART:
                            return
                raise AssertionError("the restart never finished")

            async with asyncio.timeout(APPEND_DEADLINE_S):
                appending = asyncio.create_task(appender())
                await asyncio.wait(
                    [appending, asyncio.create_task(enough_before.wait())],
                    return_when=asyncio.FIRST_COMPLETED,
                )
                assert not appending.done(), appending
                acknowledged_before = len(acknowledged)
                # `docker restart`: SIGTERM (graceful stop), then start again.
                await asyncio.to_thread(docker_container.restart, timeout=10)
                restarted.set()
                await appending

            await wait_serving(container.address)
            stored = await read_all(log)

        docker_container.reload()
        assert docker_container.attrs["State"]["StartedAt"] != started_at, "no restart happened"
        assert "stopped" in container.logs(), "the service did not stop gracefully"
        assert len(acknowledged) >= acknowledged_before + AFTER_RESTART * BATCH
        assert spanning >= 1, "no append was under way while the container restarted"
        # Every acknowledged event is there, at the seq it was acknowledged
        # with; seqs are gapless from 0 and no id is stored twice.
        assert [seq for _, seq in stored] == list(range(len(stored)))
        stored_ids = dict(stored)
        assert len(stored_ids) == len(stored)
        missing = {i: s for i, s in acknowledged.items() if stored_ids.get(i) != s}
        assert not missing, f"lost or moved after the restart: {missing}"
        assert set(stored_ids) == set(acknowledged)
        print(f"{len(acknowledged)} events acknowledged, {failures} failed attempts retried")
