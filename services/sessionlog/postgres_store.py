"""PostgreSQL backend of the session log, for deployments that outgrow one
machine: replicas share it, and NOTIFY tells every replica's subscribers
about appends made by the others.

Appends take one transaction-scoped advisory lock, so positions (a sequence)
become visible in commit order and a subscriber to all sessions never skips
a position that commits late. That serialises appends across sessions; the
session log's write rate is far below what one PostgreSQL primary sustains.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from services.common.errors import EventIdConflict, SessionNotFound, WrongExpectedSeq

from .port import AppendResult, Direction, ReadResult, TailPage
from .store import (
    MESSAGE_KINDS,
    Event,
    SessionHeader,
    SessionSummary,
    StateCheckpoint,
    event_from_row,
    event_kind,
    storable,
    summary_from_row,
    touch_values,
)

CHANNEL = "agenthost_sessionlog"
APPEND_LOCK = 0x61676E74  # any constant shared by every replica

SCHEMA = """
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
"""

EVENT_COLUMNS = "session_id, seq, position, body"
Row = dict[str, Any]


def _to_event(row: Row) -> Event:
    return event_from_row(row["session_id"], row["seq"], row["position"], bytes(row["body"]))


class PostgresSessionStore:
    def __init__(self, dsn: str, schema: str = "public") -> None:
        self.dsn = dsn
        self.schema = schema
        self._write: psycopg.AsyncConnection[Row] | None = None
        self._read: psycopg.AsyncConnection[Row] | None = None
        self._write_lock = asyncio.Lock()
        self._read_lock = asyncio.Lock()

    # -- lifecycle -------------------------------------------------------------

    async def open(self) -> None:
        self._write = await self._connect()
        async with self._write.transaction():
            await self._write.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
            )
            await self._write.execute(SCHEMA)
        self._read = await self._connect()

    async def close(self) -> None:
        for connection in (self._write, self._read):
            if connection is not None:
                await connection.close()
        self._write = self._read = None

    async def _connect(self) -> psycopg.AsyncConnection[Row]:
        connection = await psycopg.AsyncConnection.connect(
            self.dsn, autocommit=True, row_factory=dict_row
        )
        await connection.execute(
            sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema))
        )
        return connection

    def _connection(self, *, write: bool) -> psycopg.AsyncConnection[Row]:
        connection = self._write if write else self._read
        if connection is None:
            raise RuntimeError("session store is not open")
        return connection

    async def _fetch(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        async with self._read_lock:
            cursor = await self._connection(write=False).execute(query, params)
            return await cursor.fetchall()

    # -- changes from other replicas ---------------------------------------------

    async def changes(self) -> AsyncIterator[str]:
        """Session ids appended to by any replica (NOTIFY), until cancelled."""
        listener = await self._connect()
        try:
            await listener.execute(f"LISTEN {CHANNEL}")
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
        self, limit: int, offset: int, session_ids: Sequence[str], running_only: bool = False
    ) -> tuple[list[SessionSummary], bool]:
        conditions = ["running"] if running_only else []
        params: list[Any] = []
        if session_ids:
            conditions.append("id = ANY(%s)")
            params.append(list(session_ids))
        where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        rows = await self._fetch(
            f"SELECT * FROM sessions {where} ORDER BY updated_at_us DESC, id LIMIT %s OFFSET %s",
            [*params, limit + 1, offset],
        )
        return [summary_from_row(r) for r in rows[:limit]], len(rows) > limit

    # -- append ----------------------------------------------------------------------------

    async def append(
        self,
        header: SessionHeader,
        events: Sequence[Event],
        expected_last_seq: int | None,
        now_us: int,
    ) -> AppendResult:
        async with self._write_lock:
            connection = self._connection(write=True)
            async with connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK,))
                return await _append(connection, header, events, expected_last_seq, now_us)

    # -- reads -------------------------------------------------------------------------------

    async def _last_seq(self, session_id: str) -> int:
        rows = await self._fetch("SELECT last_seq FROM sessions WHERE id = %s", (session_id,))
        if not rows:
            raise SessionNotFound(session_id)
        return int(rows[0]["last_seq"])

    async def read(
        self, session_id: str, from_seq: int | None, direction: Direction, limit: int
    ) -> ReadResult:
        last_seq = await self._last_seq(session_id)
        if direction is Direction.FORWARD:
            query = (
                f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = %s AND seq >= %s "
                "ORDER BY seq LIMIT %s"
            )
            start = from_seq or 0
        else:
            query = (
                f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = %s AND seq <= %s "
                "ORDER BY seq DESC LIMIT %s"
            )
            start = last_seq if from_seq is None else from_seq
        rows = await self._fetch(query, (session_id, start, limit))
        return ReadResult([_to_event(r) for r in rows], last_seq)

    async def tail_page(
        self, session_id: str, before_seq: int | None, message_limit: int
    ) -> TailPage:
        last_seq = await self._last_seq(session_id)
        end = last_seq + 1 if before_seq is None else min(before_seq, last_seq + 1)
        start = await self._page_start(session_id, end, message_limit)
        rows = await self._fetch(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = %s AND seq >= %s "
            "AND seq < %s ORDER BY seq",
            (session_id, start, end),
        )
        return TailPage([_to_event(r) for r in rows], start > 0, start, last_seq)

    async def _page_start(self, session_id: str, end: int, message_limit: int) -> int:
        """The oldest of the page's messages, or 0 when no older message exists."""
        rows = await self._fetch(
            "SELECT seq FROM events WHERE session_id = %s AND is_message AND seq < %s "
            "ORDER BY seq DESC LIMIT 1 OFFSET %s",
            (session_id, end, message_limit - 1),
        )
        if not rows:
            return 0
        start = int(rows[0]["seq"])
        older = await self._fetch(
            "SELECT 1 FROM events WHERE session_id = %s AND is_message AND seq < %s LIMIT 1",
            (session_id, start),
        )
        return start if older else 0

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
        async with self._write_lock:
            connection = self._connection(write=True)
            async with connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK,))
                return await _fork(connection, source_id, up_to_seq, header, now_us)

    async def delete(self, session_id: str) -> bool:
        async with self._write_lock:
            connection = self._connection(write=True)
            async with connection.transaction():
                await connection.execute(
                    "DELETE FROM state_checkpoints WHERE session_id = %s", (session_id,)
                )
                await connection.execute("DELETE FROM events WHERE session_id = %s", (session_id,))
                deleted = await connection.execute(
                    "DELETE FROM sessions WHERE id = %s", (session_id,)
                )
                return deleted.rowcount > 0

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
        async with self._write_lock:
            await self._connection(write=True).execute(
                "INSERT INTO state_checkpoints (session_id, seq, version, state) "
                "SELECT id, %s, %s, %s FROM sessions WHERE id = %s "
                "ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, "
                "version = excluded.version, state = excluded.state "
                "WHERE excluded.seq > state_checkpoints.seq "
                "OR excluded.version <> state_checkpoints.version",
                (checkpoint.seq, checkpoint.version, checkpoint.state, session_id),
            )


async def _one(
    connection: psycopg.AsyncConnection[Row], query: str, params: Sequence[Any]
) -> Row | None:
    cursor = await connection.execute(query, params)
    return await cursor.fetchone()


async def _append(
    connection: psycopg.AsyncConnection[Row],
    header: SessionHeader,
    events: Sequence[Event],
    expected_last_seq: int | None,
    now_us: int,
) -> AppendResult:
    row = await _one(connection, "SELECT last_seq FROM sessions WHERE id = %s", (header.id,))
    last_seq = -1 if row is None else int(row["last_seq"])
    ids = [e.id for e in events]
    existing: dict[str, int] = {}
    if row is not None:
        cursor = await connection.execute(
            "SELECT event_id, seq FROM events WHERE session_id = %s AND event_id = ANY(%s)",
            (header.id, ids),
        )
        existing = {r["event_id"]: int(r["seq"]) for r in await cursor.fetchall()}
    if existing:
        if len(existing) != len(ids):
            raise EventIdConflict(header.id, next(i for i in ids if i in existing))
        return AppendResult([existing[i] for i in ids], last_seq, duplicate=True)
    if expected_last_seq is not None and expected_last_seq != last_seq:
        raise WrongExpectedSeq(header.id, expected_last_seq, last_seq)
    if row is None:
        await connection.execute(
            "INSERT INTO sessions (id, cwd, created_at_us, updated_at_us, last_seq, blank, "
            "forked_from) VALUES (%s, %s, %s, %s, -1, TRUE, %s)",
            (header.id, header.cwd, header.created_at_us, now_us, header.forked_from),
        )
    seqs = await _insert_events(connection, header.id, last_seq + 1, events)
    await _touch_session(connection, header.id, events, seqs[-1], now_us)
    await connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, header.id))
    return AppendResult(seqs, seqs[-1], duplicate=False)


async def _insert_events(
    connection: psycopg.AsyncConnection[Row],
    session_id: str,
    first_seq: int,
    events: Sequence[Event],
) -> list[int]:
    seqs = list(range(first_seq, first_seq + len(events)))
    async with connection.cursor() as cursor:
        await cursor.executemany(
            "INSERT INTO events (session_id, seq, event_id, kind, is_message, body) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            [
                (session_id, seq, e.id, event_kind(e), event_kind(e) in MESSAGE_KINDS, storable(e))
                for seq, e in zip(seqs, events, strict=True)
            ],
        )
    return seqs


async def _touch_session(
    connection: psycopg.AsyncConnection[Row],
    session_id: str,
    events: Sequence[Event],
    last_seq: int,
    now_us: int,
) -> None:
    await connection.execute(
        "UPDATE sessions SET last_seq = %s, updated_at_us = %s, blank = blank AND %s, "
        "title = COALESCE(%s, title), preview = COALESCE(%s, preview), "
        "running = COALESCE(%s, running), waiting = COALESCE(%s, waiting) WHERE id = %s",
        (last_seq, now_us, *touch_values(events), session_id),
    )


async def _fork(
    connection: psycopg.AsyncConnection[Row],
    source_id: str,
    up_to_seq: int | None,
    header: SessionHeader,
    now_us: int,
) -> SessionSummary:
    source = await _one(connection, "SELECT last_seq FROM sessions WHERE id = %s", (source_id,))
    if source is None:
        raise SessionNotFound(source_id)
    last = int(source["last_seq"]) if up_to_seq is None else min(up_to_seq, int(source["last_seq"]))
    await connection.execute(
        "INSERT INTO sessions (id, cwd, created_at_us, updated_at_us, last_seq, blank, "
        "forked_from) VALUES (%s, %s, %s, %s, -1, TRUE, %s)",
        (header.id, header.cwd, header.created_at_us, now_us, source_id),
    )
    cursor = await connection.execute(
        f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = %s AND seq <= %s ORDER BY seq",
        (source_id, last),
    )
    events = [_to_event(r) for r in await cursor.fetchall()]
    if events:
        await _insert_events(connection, header.id, 0, events)
        await _touch_session(connection, header.id, events, events[-1].seq, now_us)
        await connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, header.id))
    row = await _one(connection, "SELECT * FROM sessions WHERE id = %s", (header.id,))
    assert row is not None
    return summary_from_row(row)
