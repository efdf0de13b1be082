"""Services started in any order (Kubernetes has none): a peer that is not
serving yet is a warning and a retry, never an error with a traceback, and
the service recovers by itself once the peer serves.

The session log here listens but is not serving: its PostgreSQL is reached
through a relay that holds every connection until the test lets it through,
so the log's start-up waits on its storage and refuses calls with
UNAVAILABLE NOT_READY meanwhile, as a pod whose database is slow does."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agenthost.projection.v1 import projection_pb2 as pj
from agenthost.projection.v1 import projection_pb2_grpc as pj_grpc
from agenthost.sessionlog.v1 import events_pb2 as ev
from grpc_health.v1 import health_pb2
from psycopg.conninfo import conninfo_to_dict

from services.common.client import open_channel
from services.sessionlog.client import SessionLogClient
from services.sessionlog.postgres_store import PostgresSessionStore
from tests.support.hosts import ServiceProcess, wait_for_health
from tests.support.postgres import POSTGRES_DSN, drop_schema, schema_for

pytestmark = pytest.mark.postgres

WAIT_S = 30.0
SERVING = health_pb2.HealthCheckResponse.SERVING


class HeldRelay:
    """A TCP relay to PostgreSQL that passes nothing until `release()`."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._released = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    def release(self) -> None:
        self._released.set()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._released.wait()
        upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        for source, sink in ((reader, upstream_writer), (upstream_reader, writer)):
            pipe = asyncio.ensure_future(_pipe(source, sink))
            self._pipes.add(pipe)
            pipe.add_done_callback(self._pipes.discard)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()
    finally:
        with contextlib.suppress(ConnectionError):
            sink.close()


def relayed_dsn(port: int) -> str:
    parts = {**conninfo_to_dict(POSTGRES_DSN), "host": "127.0.0.1", "port": str(port)}
    return " ".join(f"{key}={value}" for key, value in parts.items())


def entries(process: ServiceProcess) -> list[dict[str, object]]:
    found = []
    for line in list(process.lines):
        with contextlib.suppress(json.JSONDecodeError):
            found.append(json.loads(line))
    return found


def warns_of_the_session_log(line: str) -> bool:
    with contextlib.suppress(json.JSONDecodeError):
        entry = json.loads(line)
        return bool(entry.get("level") == "warning" and "session log" in str(entry.get("msg")))
    return False


@contextlib.asynccontextmanager
async def held_relay() -> AsyncIterator[HeldRelay]:
    target = conninfo_to_dict(POSTGRES_DSN)
    relay = HeldRelay(str(target.get("host", "127.0.0.1")), int(str(target.get("port", 5432))))
    try:
        yield relay
    finally:
        relay.release()
        await relay.close()


async def test_a_projection_service_started_before_the_session_log_warns_and_recovers(
    tmp_path: Path,
) -> None:
    schema = schema_for(tmp_path, "start_order")
    async with held_relay() as relay:
        relay_port = await relay.start()
        session_log = ServiceProcess(
            "services.sessionlog",
            tmp_path / "sessionlog",
            env={
                "AGENTHOST_SESSIONLOG_DSN": relayed_dsn(relay_port),
                "AGENTHOST_DATABASE_SCHEMA": schema,
            },
        )
        projection = ServiceProcess(
            "services.projection", tmp_path / "projection", env={"AGENTHOST_PLANMODE_ADDR": "none"}
        )
        try:
            log_address = await session_log.start()  # listening, its storage held
            projection.env["AGENTHOST_SESSIONLOG_ADDR"] = log_address
            await projection.start()
            await projection.wait_for_line(warns_of_the_session_log, WAIT_S)

            relay.release()
            log_channel = open_channel(log_address)
            projection_channel = open_channel(projection.address)
            try:
                await wait_for_health(log_channel, SERVING)
                watch = pj_grpc.ProjectionServiceStub(projection_channel).WatchAllProjections(
                    pj.WatchAllProjectionsRequest(), wait_for_ready=True
                )
                async with asyncio.timeout(WAIT_S):
                    assert (await watch.read()).HasField("live")
                log = SessionLogClient(log_channel)
                summary, _ = await log.create_session(None, "/w")
                await log.append(summary.id, [ev.Event(turn_start=ev.TurnStart(turn_id="t"))])
                # Only the feeder, following the log again, sends changes.
                async with asyncio.timeout(WAIT_S):
                    change = (await watch.read()).change
                assert (change.session_id, change.key, change.seq) == (summary.id, "status", 0)
                watch.cancel()
            finally:
                await log_channel.close()
                await projection_channel.close()
        finally:
            projection.kill()
            session_log.kill()
            await drop_schema(PostgresSessionStore(POSTGRES_DSN, schema))
    logged = entries(projection)
    assert not [e for e in logged if e.get("level") == "error" or "exc" in e], logged
