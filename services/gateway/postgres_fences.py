"""The gateway replicas' shared fences in PostgreSQL (see fence_store.py).

Each operation is one statement or one short transaction, so replicas never
hold a lock across a call to a peer: a mutation takes its request id
(`reserve`) before the call and gives its outcome (`release`) after it. A
reservation serializes on a transaction-scoped advisory lock of its (client,
session) key, since the first one for a key has no row to lock. Rows of a
gateway that died mid-call stay in flight: their outcome is unknown, so
their ids stay used, which is what a single gateway does too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from services.common.errors import StorageUnavailable

from .fence_store import ClientKey, Order, RequestKey

SCHEMA = """
CREATE TABLE IF NOT EXISTS gateway_generations (
    account TEXT NOT NULL,
    client_id TEXT NOT NULL,
    generation BIGINT NOT NULL,
    PRIMARY KEY (account, client_id)
);
CREATE TABLE IF NOT EXISTS gateway_applied (
    account TEXT NOT NULL,
    client_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    generation BIGINT NOT NULL,
    request_id BIGINT NOT NULL,
    PRIMARY KEY (account, client_id, session_id)
);
CREATE TABLE IF NOT EXISTS gateway_in_flight (
    account TEXT NOT NULL,
    client_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    generation BIGINT NOT NULL,
    request_id BIGINT NOT NULL,
    PRIMARY KEY (account, client_id, session_id, generation, request_id)
);
"""

ADVANCE = (
    "INSERT INTO gateway_generations (account, client_id, generation) VALUES (%s, %s, %s) "
    "ON CONFLICT (account, client_id) DO UPDATE "
    "SET generation = GREATEST(gateway_generations.generation, EXCLUDED.generation) "
    "RETURNING generation"
)
LOCK_KEY = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
NEWEST = (
    "SELECT generation, request_id FROM ("
    " SELECT generation, request_id FROM gateway_applied"
    "  WHERE account = %s AND client_id = %s AND session_id = %s"
    " UNION ALL"
    " SELECT generation, request_id FROM gateway_in_flight"
    "  WHERE account = %s AND client_id = %s AND session_id = %s"
    ") AS orders ORDER BY generation DESC, request_id DESC LIMIT 1"
)
TAKE = (
    "INSERT INTO gateway_in_flight (account, client_id, session_id, generation, request_id) "
    "VALUES (%s, %s, %s, %s, %s)"
)
DONE = (
    "DELETE FROM gateway_in_flight WHERE account = %s AND client_id = %s "
    "AND session_id = %s AND generation = %s AND request_id = %s"
)
APPLIED = (
    "INSERT INTO gateway_applied (account, client_id, session_id, generation, request_id) "
    "VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (account, client_id, session_id) DO UPDATE "
    "SET generation = EXCLUDED.generation, request_id = EXCLUDED.request_id "
    "WHERE (gateway_applied.generation, gateway_applied.request_id) "
    "< (EXCLUDED.generation, EXCLUDED.request_id)"
)


class PostgresFenceStore:
    def __init__(self, dsn: str, schema: str = "public") -> None:
        self.dsn = dsn
        self.schema = schema
        self._connection: psycopg.AsyncConnection[tuple[Any, ...]] | None = None
        # One connection, one transaction at a time: each is a few statements.
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        self._connection = await self._connect()
        async with self._connection.transaction():
            await self._connection.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
            )
            await self._connection.execute(SCHEMA)

    async def _connect(self) -> psycopg.AsyncConnection[tuple[Any, ...]]:
        connection = await psycopg.AsyncConnection.connect(
            self.dsn, autocommit=True, row_factory=tuple_row
        )
        await connection.execute(
            sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema))
        )
        return connection

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
        self._connection = None

    async def advance_generation(self, client: ClientKey, generation: int) -> int:
        async with self._session() as db:
            row = await (await db.execute(ADVANCE, (*client, generation))).fetchone()
        assert row is not None
        return int(row[0])

    async def reserve(self, key: RequestKey, order: Order) -> Order | None:
        async with self._session() as db, db.transaction():
            await db.execute(LOCK_KEY, ("\x1f".join(key),))
            row = await (await db.execute(NEWEST, (*key, *key))).fetchone()
            newest = None if row is None else (int(row[0]), int(row[1]))
            if newest is not None and order <= newest:
                return newest
            await db.execute(TAKE, (*key, *order))
            return None

    async def release(self, key: RequestKey, order: Order, *, applied: bool) -> None:
        async with self._session() as db, db.transaction():
            await db.execute(DONE, (*key, *order))
            if applied:
                await db.execute(APPLIED, (*key, *order))

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[psycopg.AsyncConnection[tuple[Any, ...]]]:
        """The connection, alone; PostgreSQL unreachable is the storage
        being unavailable (UNAVAILABLE, retry), not a bug of the call."""
        async with self._lock:
            try:
                if self._connection is None:
                    raise StorageUnavailable("the gateway's fence store is not open")
                if self._connection.broken or self._connection.closed:  # PostgreSQL restarted
                    self._connection = await self._connect()
                yield self._connection
            except psycopg.OperationalError as error:
                raise StorageUnavailable(str(error).strip() or type(error).__name__) from error
