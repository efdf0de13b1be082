"""PostgreSQL backend of the session log, for deployments that outgrow one
machine: replicas share it, and NOTIFY tells every replica's subscribers
about appends made by the others.

Appends take one transaction-scoped advisory lock, so positions (a sequence)
become visible in commit order and a subscriber to all sessions never skips
a position that commits late. That serialises appends across sessions; the
session log's write rate is far below what one PostgreSQL primary sustains.
Concurrent appends share a transaction (group_commit.py): a wave takes the
lock once, draws its positions while holding it and commits once, so the
argument holds for waves as it did for single appends. Forks take the same
lock. A wave is pipelined: its reads go in one round trip, its writes and
COMMIT in the next, instead of several round trips per batch under the lock.

Lazy sessions of every replica wait in `pending_sessions`, an UNLOGGED table
apart from `sessions` (so no listing or summary sees them): not durable,
PostgreSQL empties it after a crash, as a restart empties the memory that
holds them over SQLite. A session's first append moves it, in the wave's
transaction. The tables are brought up to date by the numbered migrations of
services/common/postgres.py, like every store's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from services.common.errors import StorageUnavailable
from services.common.postgres import migrate, storage_errors

from . import store_algorithms as algorithms
from .append_plan import AppendRequest, Outcome, Stored, WavePlan, plan_wave, wanted_ids
from .group_commit import CommitStats, GroupCommitter
from .leases import Lease, LeaseChange
from .port import AppendResult, Direction, ReadResult, StoredImage, TailPage
from .store import (
    COPY_IMAGES,
    DROP_IMAGES,
    EVERY_SESSION,
    IMAGE_TABLES,
    LINK_IMAGE,
    PENDING_TTL_US,
    PUT_IMAGE,
    READ_IMAGE,
    UNLINK_IMAGES,
    Event,
    PageKey,
    SessionHeader,
    SessionSummary,
    StateCheckpoint,
    event_from_row,
    summary_from_row,
)

CHANNEL = "agenthost_sessionlog"
# How its connections show in pg_stat_activity.
APPLICATION_NAME = "agenthost sessionlog"
APPEND_LOCK = 0x61676E74  # any constant shared by every replica

STORE = "sessionlog"
# Released migrations never change; a change is a new entry at the end. The
# first is the schema made before the migrations (IF NOT EXISTS: a database
# from then adopts it as version 1 unchanged).
TABLES = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    cwd TEXT NOT NULL,
    created_at_us BIGINT NOT NULL,
    updated_at_us BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    blank BOOLEAN NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    forked_from TEXT NOT NULL DEFAULT ''
);
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS preview TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS running BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS waiting TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions (updated_at_us DESC, id);
CREATE TABLE IF NOT EXISTS events (
    position BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    seq BIGINT NOT NULL,
    event_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    is_message BOOLEAN NOT NULL,
    body BYTEA NOT NULL,
    UNIQUE (session_id, seq),
    UNIQUE (session_id, event_id)
);
CREATE INDEX IF NOT EXISTS events_messages ON events (session_id, is_message, seq);
CREATE TABLE IF NOT EXISTS state_checkpoints (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id),
    seq BIGINT NOT NULL,
    version INTEGER NOT NULL,
    state BYTEA NOT NULL
);
CREATE TABLE IF NOT EXISTS session_leases (
    session_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    token BIGINT NOT NULL,
    expires_at_us BIGINT NOT NULL
);
"""
PENDING_TABLE = """
CREATE UNLOGGED TABLE pending_sessions (
    id TEXT PRIMARY KEY,
    cwd TEXT NOT NULL,
    created_at_us BIGINT NOT NULL,
    forked_from TEXT NOT NULL
);
CREATE INDEX pending_sessions_by_age ON pending_sessions (created_at_us);
"""
MIGRATIONS = (TABLES, PENDING_TABLE, IMAGE_TABLES.format(blob="BYTEA"))

EVENT_COLUMNS = "session_id, seq, position, body"
INSERT_SESSION = (
    "INSERT INTO sessions (id, cwd, created_at_us, updated_at_us, forked_from, last_seq, blank) "
    "VALUES (%s, %s, %s, %s, %s, -1, TRUE)"
)
INSERT_EVENT = (
    "INSERT INTO events (session_id, seq, event_id, kind, is_message, body) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
UPSERT_LEASE = (
    "INSERT INTO session_leases (session_id, owner, token, expires_at_us) "
    "VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, token = excluded.token, "
    "expires_at_us = excluded.expires_at_us"
)
TOUCH_SESSION = (
    "UPDATE sessions SET last_seq = %s, updated_at_us = %s, blank = blank AND %s, "
    "title = COALESCE(%s, title), preview = COALESCE(%s, preview), "
    "running = COALESCE(%s, running), waiting = COALESCE(%s, waiting) WHERE id = %s"
)
Row = dict[str, Any]


def _to_event(row: Row) -> Event:
    return event_from_row(row["session_id"], row["seq"], row["position"], bytes(row["body"]))


class PostgresSessionStore:
    def __init__(self, dsn: str, schema: str = "public") -> None:
        self.dsn = dsn
        self.schema = schema
        self._write: psycopg.AsyncConnection[Row] | None = None
        self._read: psycopg.AsyncConnection[Row] | None = None
        self._read_lock = asyncio.Lock()
        # The only user of the write connection, one transaction at a time.
        self._committer = GroupCommitter(self._commit_wave)

    @property
    def stats(self) -> CommitStats:
        return self._committer.stats

    # -- lifecycle -------------------------------------------------------------

    @property
    def pending(self) -> PostgresPendingSessions:
        return PostgresPendingSessions(self._fetch)

    async def open(self) -> None:
        self._write = await self._connect()
        await migrate(self._write, self.schema, STORE, MIGRATIONS)
        self._read = await self._connect()

    async def close(self) -> None:
        await self._committer.close()
        for connection in (self._write, self._read):
            if connection is not None:
                await connection.close()
        self._write = self._read = None

    async def _connect(self) -> psycopg.AsyncConnection[Row]:
        connection = await psycopg.AsyncConnection.connect(
            self.dsn, autocommit=True, row_factory=dict_row, application_name=APPLICATION_NAME
        )
        await connection.execute(
            sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema))
        )
        # Every read of the log walks one session's index in seq order, most
        # with a LIMIT. Where the statistics predate a session's growth (it
        # grew since the last ANALYZE), the planner reckons it a few rows and
        # takes a bitmap scan and a sort of all of them instead: a tail page
        # of 50 messages sorted 10,000 (15 ms, not 0.1 ms).
        await connection.execute("SET enable_bitmapscan TO off")
        return connection

    def _connection(self, *, write: bool) -> psycopg.AsyncConnection[Row]:
        connection = self._write if write else self._read
        if connection is None:
            raise RuntimeError("session store is not open")
        if connection.broken or connection.closed:  # a probe connects again
            raise StorageUnavailable("the connection to PostgreSQL was lost")
        return connection

    async def _fetch(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        """Rows in binary: event bodies come as they are stored, not as hex
        text decoded again (a third of what reading 1000 events cost)."""
        async with self._read_lock, storage_errors():
            cursor = await self._connection(write=False).execute(query, params, binary=True)
            return await cursor.fetchall()

    async def probe(self) -> None:
        """Each connection answers, or is made again (PostgreSQL dropped it)."""

        async def probe() -> None:
            async with storage_errors():
                self._write = await self._answering(self._write)
                async with self._read_lock:
                    self._read = await self._answering(self._read)

        await self._committer.alone(probe)

    async def _answering(
        self, connection: psycopg.AsyncConnection[Row] | None
    ) -> psycopg.AsyncConnection[Row]:
        if connection is not None and not (connection.broken or connection.closed):
            try:
                await connection.execute("SELECT 1")
                return connection
            except psycopg.OperationalError:
                pass  # cut: psycopg may learn it only now
        if connection is not None:
            await connection.close()
        fresh = await self._connect()
        await fresh.execute("SELECT 1")
        return fresh

    # -- changes from other replicas ---------------------------------------------

    async def changes(self) -> AsyncIterator[str]:
        """Session ids appended to by any replica (NOTIFY), until cancelled."""
        listener = await self._connect()
        try:
            await listener.execute(f"LISTEN {CHANNEL}")
            yield EVERY_SESSION
            async for notice in listener.notifies():
                yield notice.payload
        finally:
            await listener.close()

    # -- sessions ----------------------------------------------------------------------

    async def get_header(self, session_id: str) -> SessionHeader | None:
        rows = await self._fetch(
            "SELECT id, cwd, created_at_us, forked_from FROM sessions WHERE id = %s", (session_id,)
        )
        if not rows:
            return None
        row = rows[0]
        return SessionHeader(row["id"], row["cwd"], row["created_at_us"], row["forked_from"])

    async def summary(self, session_id: str) -> SessionSummary | None:
        rows = await self._fetch("SELECT * FROM sessions WHERE id = %s", (session_id,))
        return summary_from_row(rows[0]) if rows else None

    async def list_sessions(
        self,
        limit: int,
        after: PageKey | None,
        session_ids: Sequence[str],
        running_only: bool = False,
    ) -> tuple[list[SessionSummary], bool]:
        conditions = ["running"] if running_only else []
        params: list[Any] = []
        if session_ids:
            conditions.append("id = ANY(%s)")
            params.append(list(session_ids))
        if after is not None:
            # A keyset, not an offset: sessions_by_update's order.
            conditions.append("(updated_at_us < %s OR (updated_at_us = %s AND id > %s))")
            params += [after.updated_at_us, after.updated_at_us, after.id]
        where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        rows = await self._fetch(
            f"SELECT * FROM sessions {where} ORDER BY updated_at_us DESC, id LIMIT %s",
            [*params, limit + 1],
        )
        return [summary_from_row(r) for r in rows[:limit]], len(rows) > limit

    # -- append ----------------------------------------------------------------------------

    async def append(
        self,
        header: SessionHeader,
        events: Sequence[Event],
        expected_last_seq: int | None,
        now_us: int,
        lease_token: int | None = None,
    ) -> AppendResult:
        request = AppendRequest(header, events, expected_last_seq, now_us, lease_token)
        return await self._committer.append(request)

    async def _commit_wave(self, requests: Sequence[AppendRequest]) -> list[Outcome]:
        """One wave, one transaction, two round trips: BEGIN, the lock and the
        reads travel together; then the writes, NOTIFY and COMMIT."""
        async with storage_errors():
            connection = self._connection(write=True)
            async with _pipelined_transaction(connection):
                await connection.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK,))
                plan = plan_wave(await _stored(connection, requests), requests)
                await _write_plan(connection, plan)
        return plan.outcomes

    # -- leases -------------------------------------------------------------------------

    async def change_lease(self, session_id: str, change: LeaseChange) -> Lease:
        """Under the append lock, so a wave of any replica reads the token
        either before this change or after its commit, never in between. Two
        round trips, as a wave: BEGIN, the lock and the read; the write and
        COMMIT."""

        async def apply() -> Lease:
            connection = self._connection(write=True)
            async with storage_errors(), _pipelined_transaction(connection):
                await connection.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK,))
                row = await _one(
                    connection,
                    "SELECT session_id, owner, token, expires_at_us FROM session_leases "
                    "WHERE session_id = %s",
                    (session_id,),
                )
                stored, answer = change(None if row is None else Lease(**row))
                await connection.execute(
                    UPSERT_LEASE,
                    (stored.session_id, stored.owner, stored.token, stored.expires_at_us),
                )
                return answer

        return await self._committer.alone(apply)

    # -- reads -------------------------------------------------------------------------------

    async def read(
        self, session_id: str, from_seq: int | None, direction: Direction, limit: int
    ) -> ReadResult:
        algorithm = algorithms.read(session_id, from_seq, direction, limit)
        return await algorithms.run_async(algorithm, partial(_answer, self._fetch))

    async def tail_page(
        self, session_id: str, before_seq: int | None, message_limit: int
    ) -> TailPage:
        algorithm = algorithms.tail_page(session_id, before_seq, message_limit)
        return await algorithms.run_async(algorithm, partial(_answer, self._fetch))

    async def read_all(self, after_position: int, limit: int) -> list[Event]:
        rows = await self._fetch(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE position > %s ORDER BY position LIMIT %s",
            (after_position, limit),
        )
        return [_to_event(r) for r in rows]

    async def last_position(self) -> int:
        rows = await self._fetch("SELECT COALESCE(MAX(position), 0) AS p FROM events")
        return int(rows[0]["p"])

    # -- fork ----------------------------------------------------------------------------------

    async def fork(
        self, source_id: str, up_to_seq: int | None, header: SessionHeader, now_us: int
    ) -> SessionSummary:
        async def fork() -> SessionSummary:
            connection = self._connection(write=True)
            async with storage_errors(), connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK,))
                algorithm = algorithms.fork(source_id, up_to_seq, header, now_us)
                answer = partial(_answer, partial(_execute, connection), writing=connection)
                return await algorithms.run_async(algorithm, answer)

        return await self._committer.alone(fork)

    async def delete(self, session_id: str) -> bool:
        async def delete() -> bool:
            connection = self._connection(write=True)
            async with storage_errors(), connection.transaction():
                await connection.execute(
                    "DELETE FROM state_checkpoints WHERE session_id = %s", (session_id,)
                )
                await connection.execute(_sql(DROP_IMAGES), (session_id, session_id))
                await connection.execute(_sql(UNLINK_IMAGES), (session_id,))
                await connection.execute("DELETE FROM events WHERE session_id = %s", (session_id,))
                deleted = await connection.execute(
                    "DELETE FROM sessions WHERE id = %s", (session_id,)
                )
                return deleted.rowcount > 0

        return await self._committer.alone(delete)

    # -- images ------------------------------------------------------------------------------

    async def put_images(self, session_id: str, images: Sequence[StoredImage]) -> None:
        async def put() -> None:
            connection = self._connection(write=True)
            async with storage_errors(), connection.transaction():
                for image in images:
                    await connection.execute(
                        _sql(PUT_IMAGE), (image.digest, image.media_type, image.data)
                    )
                    await connection.execute(_sql(LINK_IMAGE), (session_id, image.digest))

        await self._committer.alone(put)

    async def read_image(self, session_id: str, digest: str) -> StoredImage | None:
        rows = await self._fetch(_sql(READ_IMAGE), (session_id, digest))
        if not rows:
            return None
        return StoredImage(digest, rows[0]["media_type"], bytes(rows[0]["data"]))

    # -- checkpoints -------------------------------------------------------------------------

    async def load_checkpoint(self, session_id: str) -> StateCheckpoint | None:
        rows = await self._fetch(
            "SELECT seq, version, state FROM state_checkpoints WHERE session_id = %s",
            (session_id,),
        )
        if not rows:
            return None
        return StateCheckpoint(rows[0]["seq"], rows[0]["version"], bytes(rows[0]["state"]))

    async def save_checkpoint(self, session_id: str, checkpoint: StateCheckpoint) -> None:
        async def save() -> None:
            async with storage_errors():
                await self._connection(write=True).execute(
                    "INSERT INTO state_checkpoints (session_id, seq, version, state) "
                    "SELECT id, %s, %s, %s FROM sessions WHERE id = %s "
                    "ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, "
                    "version = excluded.version, state = excluded.state "
                    "WHERE excluded.seq > state_checkpoints.seq "
                    "OR excluded.version <> state_checkpoints.version",
                    (checkpoint.seq, checkpoint.version, checkpoint.state, session_id),
                )

        await self._committer.alone(save)


@asynccontextmanager
async def _pipelined_transaction(connection: psycopg.AsyncConnection[Row]) -> AsyncIterator[None]:
    """BEGIN and COMMIT sent down the pipeline with the statements between
    them (psycopg's transaction() would sync the pipeline on entry and exit:
    two more round trips). When anything fails, a connection that still
    works is left idle for the next transaction."""
    try:
        async with connection.pipeline():
            await connection.execute("BEGIN")
            yield
            await connection.execute("COMMIT")
    except BaseException:
        if connection.info.transaction_status != TransactionStatus.IDLE:
            with suppress(psycopg.Error):  # a broken connection: the cause is what matters
                await connection.execute("ROLLBACK")
        raise


async def _one(
    connection: psycopg.AsyncConnection[Row], query: str, params: Sequence[Any]
) -> Row | None:
    cursor = await connection.execute(query, params)
    return await cursor.fetchone()


async def _stored(
    connection: psycopg.AsyncConnection[Row], requests: Sequence[AppendRequest]
) -> Stored:
    wanted = wanted_ids(requests)
    pairs = [(session_id, event_id) for session_id, ids in wanted.items() for event_id in ids]
    # The queries are sent before any result is awaited: one round trip.
    sessions = await connection.execute(
        "SELECT id, last_seq FROM sessions WHERE id = ANY(%s)", (list(wanted),)
    )
    events = await connection.execute(
        "SELECT e.session_id, e.event_id, e.seq FROM events AS e "
        "JOIN unnest(%s::text[], %s::text[]) AS w (session_id, event_id) "
        "USING (session_id, event_id)",
        ([p[0] for p in pairs], [p[1] for p in pairs]),
    )
    leases = await connection.execute(
        "SELECT session_id, token FROM session_leases WHERE session_id = ANY(%s)", (list(wanted),)
    )
    last_seqs = {r["id"]: int(r["last_seq"]) for r in await sessions.fetchall()}
    seqs = {(r["session_id"], r["event_id"]): int(r["seq"]) for r in await events.fetchall()}
    tokens = {r["session_id"]: int(r["token"]) for r in await leases.fetchall()}
    return Stored(last_seqs, seqs, tokens)


async def _write_plan(connection: psycopg.AsyncConnection[Row], plan: WavePlan) -> None:
    async with connection.cursor() as cursor:
        for statement, rows in (
            (INSERT_SESSION, plan.new_sessions),
            (INSERT_EVENT, plan.events),
            (TOUCH_SESSION, plan.touches),
        ):
            if rows:
                await cursor.executemany(statement, rows)
    if plan.new_sessions:
        await connection.execute(
            "DELETE FROM pending_sessions WHERE id = ANY(%s)", ([r[0] for r in plan.new_sessions],)
        )
    if plan.touches:
        await connection.execute(
            "SELECT pg_notify(%s, s) FROM unnest(%s::text[]) AS s",
            (CHANNEL, plan.touched_sessions),
        )


Fetch = Callable[[str, Sequence[Any]], Awaitable[list[Row]]]


def _sql(statement: str) -> str:
    return statement.format(p="%s")


async def _execute(
    connection: psycopg.AsyncConnection[Row], query: str, params: Sequence[Any]
) -> list[Row]:
    """A statement on the connection of a transaction; its rows (none for a write)."""
    cursor = await connection.execute(query, params)
    return await cursor.fetchall() if cursor.description is not None else []


async def _events(fetch: Fetch, where: str, params: Sequence[Any]) -> list[Event]:
    rows = await fetch(f"SELECT {EVENT_COLUMNS} FROM events WHERE {where}", params)
    return [_to_event(r) for r in rows]


async def _answer(
    fetch: Fetch, ask: algorithms.Ask, writing: psycopg.AsyncConnection[Row] | None = None
) -> object:
    """One ask of the shared store algorithms, in PostgreSQL's SQL (the
    writes on `writing`, the connection of the write transaction)."""
    match ask:
        case algorithms.LastSeq(session_id):
            rows = await fetch("SELECT last_seq FROM sessions WHERE id = %s", (session_id,))
            return int(rows[0]["last_seq"]) if rows else None
        case algorithms.Summary(session_id):
            rows = await fetch("SELECT * FROM sessions WHERE id = %s", (session_id,))
            return summary_from_row(rows[0]) if rows else None
        case algorithms.EventsFrom(session_id, from_seq, limit):
            where = "session_id = %s AND seq >= %s ORDER BY seq LIMIT %s"
            return await _events(fetch, where, (session_id, from_seq, limit))
        case algorithms.EventsBack(session_id, up_to_seq, limit):
            where = "session_id = %s AND seq <= %s ORDER BY seq DESC LIMIT %s"
            return await _events(fetch, where, (session_id, up_to_seq, limit))
        case algorithms.EventsThrough(session_id, last_seq):
            where = "session_id = %s AND seq <= %s ORDER BY seq"
            return await _events(fetch, where, (session_id, last_seq))
        case algorithms.EventsBetween(session_id, start, end):
            where = "session_id = %s AND seq >= %s AND seq < %s ORDER BY seq"
            return await _events(fetch, where, (session_id, start, end))
        case algorithms.MessagesBack(session_id, end, offset):
            rows = await fetch(
                "SELECT seq FROM events WHERE session_id = %s AND is_message AND seq < %s "
                "ORDER BY seq DESC LIMIT 2 OFFSET %s",
                (session_id, end, offset),
            )
            return [int(row["seq"]) for row in rows]
        case algorithms.AddSession(session):
            await fetch(INSERT_SESSION, session)
        case algorithms.AddEvents(events):
            assert writing is not None, "a write asked outside a write transaction"
            async with writing.cursor() as writer:
                await writer.executemany(INSERT_EVENT, events)
        case algorithms.Touch(touch):
            await fetch(TOUCH_SESSION, touch)
        case algorithms.Forked(session_id):
            # Subscribers on every replica follow the fork's events at once.
            await fetch("SELECT pg_notify(%s, %s)", (CHANNEL, session_id))
        case algorithms.CopyImages(source_id, target_id):
            await fetch(_sql(COPY_IMAGES), (target_id, source_id))
    return None


class PostgresPendingSessions:
    """The lazy sessions of every replica (`pending_sessions`). Each call is
    single autocommit statements on the store's read connection: they need
    neither the append lock nor a turn in the write queue."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch

    async def add(self, header: SessionHeader) -> SessionHeader:
        await self._fetch(
            "DELETE FROM pending_sessions WHERE created_at_us < %s RETURNING id",
            (header.created_at_us - PENDING_TTL_US,),
        )
        while True:  # until ours is inserted or the one in place is read
            inserted = await self._fetch(
                "INSERT INTO pending_sessions (id, cwd, created_at_us, forked_from) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id",
                (header.id, header.cwd, header.created_at_us, header.forked_from),
            )
            existing = header if inserted else await self.get(header.id)
            if existing is not None:
                return existing

    async def get(self, session_id: str) -> SessionHeader | None:
        rows = await self._fetch(
            "SELECT id, cwd, created_at_us, forked_from FROM pending_sessions WHERE id = %s",
            (session_id,),
        )
        return SessionHeader(**rows[0]) if rows else None

    async def discard(self, session_id: str) -> bool:
        rows = await self._fetch(
            "DELETE FROM pending_sessions WHERE id = %s RETURNING id", (session_id,)
        )
        return bool(rows)

    async def made_durable(self, session_id: str) -> None:
        """Nothing left to do: the append's transaction deleted the row."""
