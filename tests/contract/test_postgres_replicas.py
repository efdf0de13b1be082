"""Two session-log replicas on one PostgreSQL: a subscriber of one sees what
the other appends, live (NOTIFY), and positions never run backwards; a
session lease taken on one fences appends made through the other; a session
created through one and not yet appended to (pending) is served by the
other, and listed by neither."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
import pytest

from services.common.errors import LeaseLost, SessionConflict, SessionNotFound
from services.sessionlog.domain import SessionLog
from services.sessionlog.leases import Lease
from services.sessionlog.port import CaughtUp, Heartbeat, TailPage
from services.sessionlog.postgres_store import (
    APPLICATION_NAME,
    MIGRATIONS,
    STORE,
    PostgresSessionStore,
)
from tests.support.clocks import ManualClock
from tests.support.events import title, user
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


async def listed(*logs: SessionLog) -> list[list[str]]:
    return [[s.id for s in (await log.list_sessions())[0]] for log in logs]


async def test_a_pending_session_is_served_by_the_other_replica_until_its_first_append(
    tmp_path: Path,
) -> None:
    async with two_replicas(tmp_path, "pending") as (first, second):
        created, was_created = await first.create_session("s", "/w")
        assert was_created
        assert await second.get_session("s") == created
        assert await second.create_session("s", "/w") == (created, False)
        with pytest.raises(SessionConflict):
            await second.create_session("s", "/other")
        assert await second.tail_page("s") == TailPage([], False, 0, -1, created)
        assert (await second.read("s")).events == []
        empty = await second.append("s", [])
        assert (empty.seqs, empty.last_seq) == ([], -1)
        assert await listed(first, second) == [[], []]

        assert (await second.append("s", [user("hello")])).seqs == [0]
        assert await listed(first, second) == [["s"], ["s"]]
        stored = await first.get_session("s")
        assert (stored.cwd, stored.created_at, stored.last_seq) == ("/w", created.created_at, 0)
        assert await first.append("s", [user("again")], expected_last_seq=0)


async def test_a_subscriber_of_a_pending_session_on_one_replica_gets_the_first_append_on_the_other(
    tmp_path: Path,
) -> None:
    async with two_replicas(tmp_path, "pendingsub") as (first, second):
        await first.create_session("s", "/w")
        texts: list[str] = []
        async with asyncio.timeout(WAIT_S):
            async for item in second.subscribe("s", heartbeat_s=600):
                if isinstance(item, CaughtUp):
                    assert item.last_seq == -1
                    await first.append("s", [user("first")])
                elif not isinstance(item, Heartbeat):
                    texts.append(item.user_message.text)
                    break
        assert texts == ["first"]


async def test_a_pending_session_forked_through_the_other_replica_forks_pending(
    tmp_path: Path,
) -> None:
    async with two_replicas(tmp_path, "pendingfork") as (first, second):
        await first.create_session("src", "/w")
        fork = await second.fork("src", new_session_id="child")
        assert (fork.id, fork.cwd, fork.last_seq, fork.forked_from) == ("child", "/w", -1, "src")
        assert await first.get_session("child") == fork
        with pytest.raises(SessionConflict):
            await first.fork("src", new_session_id="child")
        assert await listed(first, second) == [[], []]
        await first.append("child", [user("diverge")])
        assert await listed(first, second) == [["child"], ["child"]]
        assert (await second.get_session("child")).forked_from == "src"
        assert (await second.get_session("src")).last_seq == -1


async def test_a_pending_session_deleted_through_the_other_replica_is_gone_from_both(
    tmp_path: Path,
) -> None:
    async with two_replicas(tmp_path, "pendingdel") as (first, second):
        await first.create_session("s", "/w")
        await second.delete_session("s")
        for log in (first, second):
            with pytest.raises(SessionNotFound):
                await log.get_session("s")
            with pytest.raises(SessionNotFound):
                await log.append("s", [user("late")])
        with pytest.raises(SessionNotFound):
            await first.delete_session("s")
        # The id is free again, on either replica.
        await first.create_session("s", "/other")
        assert (await second.get_session("s")).cwd == "/other"


async def test_a_fold_kept_on_one_replica_follows_what_the_other_does_to_the_session(
    tmp_path: Path,
) -> None:
    """A replica keeps the folds it loaded, and a later load folds on from
    them (reading only what came since); appends through the other replica,
    and the session deleted and made again there under its id, are in it."""
    async with two_replicas(tmp_path, "keptfold") as (first, second):
        await first.create_session("s", "/w")
        await first.append("s", [title("first"), user("one"), user("two")])
        assert (await first.load_state("s")).title == "first"

        await second.append("s", [title("second")])
        read_before = first.stats.events_read
        state = await first.load_state("s")
        assert (state.title, state.last_seq) == ("second", 3)
        assert first.stats.events_read - read_before == 2  # its own last event, and the new one

        await second.delete_session("s")
        await second.create_session("s", "/w")
        await second.append("s", [user("a"), user("b"), user("c"), title("made again")])
        state = await first.load_state("s")
        assert (state.title, state.last_seq) == ("made again", 3)
        assert state == (await second.load_state("s"))


async def pending_table_persistence(schema: str) -> str:
    async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as db:
        cursor = await db.execute(
            "SELECT c.relpersistence FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = 'pending_sessions'",
            (schema,),
        )
        row = await cursor.fetchone()
        assert row is not None
        return str(row[0])


async def test_tables_made_before_the_migrations_are_adopted_and_pending_is_unlogged(
    tmp_path: Path,
) -> None:
    """A schema the session log made before it had numbered migrations (its
    first one, applied by hand, with no version recorded) keeps its sessions
    and gains the pending table, which PostgreSQL empties after a crash."""
    store = PostgresSessionStore(POSTGRES_DSN, f"adopt_{os.getpid()}_{tmp_path.name.lower()}")
    await drop_schema(store)
    async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as db:
        await db.execute(f'CREATE SCHEMA "{store.schema}"')
        await db.execute(f'SET search_path TO "{store.schema}"')
        await db.execute(MIGRATIONS[0])
        await db.execute(
            "INSERT INTO sessions (id, cwd, created_at_us, updated_at_us, last_seq, blank) "
            "VALUES ('old', '/w', 1, 1, -1, TRUE)"
        )
    await store.open()
    try:
        assert (await store.get_header("old")) is not None
        rows = await store.pending.get("old"), await pending_table_persistence(store.schema)
        assert rows == (None, "u")
        async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as db:
            cursor = await db.execute(
                f'SELECT version FROM "{store.schema}".schema_migrations WHERE store = %s',
                (STORE,),
            )
            assert await cursor.fetchone() == (len(MIGRATIONS),)
    finally:
        await store.close()
        await drop_schema(store)
