"""The session log's storage failing under it: its files made immutable
(`chattr +i`, which binds root too), then writable again. Calls get a typed
UNAVAILABLE, health turns NOT_SERVING, and the service recovers by itself
without losing what it had acknowledged."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
from agenthost.sessionlog.v1 import session_log_pb2 as pb
from agenthost.sessionlog.v1 import session_log_pb2_grpc as pb_grpc
from grpc_health.v1 import health_pb2

from services.sessionlog.client import SessionLogClient
from services.sessionlog.service import session_log_service
from tests.support.events import user
from tests.support.hosts import running_host, wait_for_health
from tests.support.rpc import expect_rpc_error, reason_of

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@contextmanager
def immutable(folder: Path) -> Iterator[None]:
    """Every file of the store refuses writes (root included) until the end."""
    # Not the -shm file: SQLite maps it into memory, where a refused write is a SIGBUS.
    files = [str(folder / name) for name in ("sessionlog.db", "sessionlog.db-wal")]
    subprocess.run(["chattr", "+i", *files], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *files], check=True)


async def test_an_unwritable_store_answers_unavailable_then_recovers_by_itself(
    tmp_path: Path,
) -> None:
    definition = session_log_service(tmp_path / "sessionlog.db")
    async with running_host("sessionlog", definition, tmp_path) as (_, channel):
        log = SessionLogClient(channel)
        stub = pb_grpc.SessionLogServiceStub(channel)
        await log.create_session("s", "/w")
        await log.append("s", [user("before", event_id="before")])

        with immutable(tmp_path):
            error = await expect_rpc_error(
                stub.Append(pb.AppendRequest(session_id="s", events=[user("x", event_id="x")])),
                grpc.StatusCode.UNAVAILABLE,
            )
            assert reason_of(error) == "STORAGE_UNAVAILABLE"
            await wait_for_health(channel, NOT_SERVING)
            # Reads still answer while writes cannot.
            assert [e.id for e in (await log.read("s")).events] == ["before"]

        await wait_for_health(channel, SERVING)  # no restart: it probed its way back
        await log.append("s", [user("after", event_id="after")])
        assert [e.id for e in (await log.read("s")).events] == ["before", "after"]
