"""A store's probe: it succeeds on working storage, and on PostgreSQL it is
what brings a store whose connections were cut back to work."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from services.common.errors import StorageUnavailable
from services.sessionlog.domain import SessionLog
from services.sessionlog.postgres_store import PostgresSessionStore
from tests.support.events import user
from tests.support.postgres import POSTGRES_DSN
from tests.support.stores import OpenLog, postgres_backend


async def test_a_probe_of_working_storage_succeeds(reopen: OpenLog) -> None:
    log = await reopen()
    await reopen.store.probe()
    await log.create_session("s", "/w")
    await log.append("s", [user("after the probe")])


async def test_cut_postgres_connections_answer_unavailable_until_a_probe_reconnects(
    tmp_path: Path,
) -> None:
    reopen = OpenLog(postgres_backend(tmp_path))
    await reopen.clean()
    try:
        log: SessionLog = await reopen()
        store = reopen.store
        assert isinstance(store, PostgresSessionStore)
        await log.create_session("s", "/w")
        await log.append("s", [user("before", event_id="before")])
        await _terminate(store)

        with pytest.raises(StorageUnavailable):
            await log.append("s", [user("lost", event_id="lost")])
        with pytest.raises(StorageUnavailable):
            await log.read("s")
        await store.probe()
        await log.append("s", [user("after", event_id="after")])
        assert [e.id for e in (await log.read("s")).events] == ["before", "after"]
    finally:
        await reopen.close()
        await reopen.clean()


async def _terminate(store: PostgresSessionStore) -> None:
    """What a PostgreSQL restart does to the store's connections."""
    pids = [c.info.backend_pid for c in (store._write, store._read) if c is not None]
    async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as admin:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,)
        )
