"""Two session-log replicas on one PostgreSQL: a subscriber of one sees what
the other appends, live (NOTIFY), and positions never run backwards; a
session lease taken on one fences appends made through the other."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
import pytest

from services.common.errors import LeaseLost
from services.sessionlog.domain import SessionLog
from services.sessionlog.leases import Lease
from services.sessionlog.port import CaughtUp, Heartbeat
from services.sessionlog.postgres_store import APPLICATION_NAME, PostgresSessionStore
from tests.support.clocks import ManualClock
from tests.support.events import user
from tests.support.postgres import POSTGRES_DSN, drop_schema

WAIT_S = 10.0


@asynccontextmanager
async def two_replicas(tmp_path: Path, prefix: str) -> AsyncIterator[tuple[SessionLog, SessionLog]]:
    """Two session logs on one fresh schema, each following the other's appends."""
    schema = f"{prefix}_{os.getpid()}_{tmp_path.name.lower().replace('-', '_')}"
    stores = [PostgresSessionStore(POSTGRES_DSN, schema) for _ in range(2)]
    await drop_schema(stores[0])
    for store in stores:
        await store.open()
    first, second = SessionLog(stores[0]), SessionLog(stores[1])
    feeds = [asyncio.create_task(log.follow_shared_store()) for log in (first, second)]
    try:
        yield first, second
    finally:
        for task in feeds:
            task.cancel()
        await asyncio.gather(*feeds, return_exceptions=True)
        for store in stores:
            await store.close()
        await drop_schema(stores[0])


async def test_replicas_starting_at_once_on_a_fresh_schema_all_open(tmp_path: Path) -> None:
    """As a deployment starts them: every replica makes the schema and its
    tables if they are missing, and none fails because another made them
    at that moment (one of two process replicas used to exit on it)."""
    schema = f"fresh_{os.getpid()}_{tmp_path.name.lower().replace('-', '_')}"
    stores = [PostgresSessionStore(POSTGRES_DSN, schema) for _ in range(4)]
    await drop_schema(stores[0])
    try:
        opened = await asyncio.gather(*(store.open() for store in stores), return_exceptions=True)
        assert [o for o in opened if o is not None] == []
        first, last = SessionLog(stores[0]), SessionLog(stores[-1])
        await first.create_session("s", "/w")
        await first.append("s", [user("kept")])
        events = (await last.read("s")).events
        assert [e.user_message.text for e in events] == ["kept"]
    finally:
        for store in stores:
            await store.close()
        await drop_schema(stores[0])


async def test_a_subscriber_on_one_replica_sees_appends_made_on_another(tmp_path: Path) -> None:
    async with two_replicas(tmp_path, "replicas") as (first, second):
        await second.create_session("s", "/w")
        await second.append("s", [user("from the second replica")])
        received: list[tuple[str, int]] = []
        async with asyncio.timeout(WAIT_S):
            async for item in first.subscribe_all(heartbeat_s=60):
                if isinstance(item, CaughtUp):
                    for n in range(3):
                        await second.append("s", [user(f"live {n}")])
                elif not isinstance(item, Heartbeat):
                    received.append((item.session_id, item.position))
                    if len(received) == 4:
                        break
        assert [p for _, p in received] == sorted(p for _, p in received)
        assert {s for s, _ in received} == {"s"}


async def cut_the_listeners() -> int:
    """End the session logs' LISTEN connections, as a PostgreSQL restart
    would; how many were ended."""
    async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as db:
        cursor = await db.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s AND query LIKE 'LISTEN%%' AND pid <> pg_backend_pid()",
            (APPLICATION_NAME,),
        )
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])


async def test_a_subscriber_keeps_following_another_replica_after_its_listener_is_cut(
    tmp_path: Path,
) -> None:
    """The listener is made again and the subscriber reads what it missed at
    once, not at its next heartbeat (far beyond this test's wait)."""
    async with two_replicas(tmp_path, "relisten") as (first, second):
        await second.create_session("s", "/w")
        await second.append("s", [user("before the cut")])
        texts: list[str] = []
        async with asyncio.timeout(WAIT_S):
            async for item in first.subscribe("s", heartbeat_s=600):
                if isinstance(item, CaughtUp):
                    assert await cut_the_listeners() >= 1
                    await second.append("s", [user("after the cut")])
                elif not isinstance(item, Heartbeat):
                    texts.append(item.user_message.text)
                    if texts[-1] == "after the cut":
                        break
        assert texts == ["before the cut", "after the cut"]


async def test_a_takeover_through_one_replica_fences_the_old_owner_on_the_other(
    tmp_path: Path,
) -> None:
    """Lease changes and append waves take the one append lock, so however
    the replicas interleave, once the takeover committed the old token is
    refused everywhere; appends racing the takeover land before it or not
    at all."""
    schema = f"leases_{os.getpid()}_{tmp_path.name.lower().replace('-', '_')}"
    stores = [PostgresSessionStore(POSTGRES_DSN, schema) for _ in range(2)]
    await drop_schema(stores[0])
    for store in stores:
        await store.open()
    clock = ManualClock()
    old_side, new_side = SessionLog(stores[0], clock), SessionLog(stores[1], clock)
    try:
        await old_side.create_session("s", "/w")
        await old_side.append("s", [user("hello")])
        old = await old_side.acquire_lease("s", "a", 10.0)
        clock.advance(10.0)
        racing = [old_side.append("s", [user(f"a{n}")], lease_token=old.token) for n in range(20)]
        outcomes = await asyncio.gather(
            *racing[:10],
            new_side.acquire_lease("s", "b", 10.0),
            *racing[10:],
            return_exceptions=True,
        )
        taken = outcomes[10]
        assert isinstance(taken, Lease)
        assert (taken.owner, taken.token) == ("b", old.token + 1)
        # The old side's appends commit in queue order: once one is refused
        # (the takeover committed), no later one is accepted.
        fenced = [isinstance(o, LeaseLost) for o in outcomes[:10] + outcomes[11:]]
        assert fenced == sorted(fenced)
        with pytest.raises(LeaseLost):
            await old_side.append("s", [user("late a")], lease_token=old.token)
        await new_side.append("s", [user("b")], lease_token=taken.token)
        events = (await new_side.read("s")).events
        texts = [e.user_message.text for e in events]
        assert texts == ["hello", *(f"a{n}" for n in range(fenced.count(False))), "b"]
        assert [e.seq for e in events] == list(range(len(events)))
    finally:
        for store in stores:
            await store.close()
        await drop_schema(stores[0])
