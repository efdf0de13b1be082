"""PostgreSQL as the services' shared stores use it: a connection in the
store's own schema, lost connections made again on the next call, storage
errors typed, and tables brought up to date by numbered migrations.

Migrations, not CREATE IF NOT EXISTS: replicas of several versions meet on
one server, so each store records the version its tables are at
(`schema_migrations`, a row per store) and a start-up applies only what is
missing, under a lock, so two replicas starting together migrate once. A
replica older than the tables refuses to start (SchemaTooNew) instead of
writing rows it does not understand.

One connection per store, its calls taking turns: the workspace and
projection stores make a handful of small statements per call, far below
what one connection carries, and a single connection keeps each store's
transactions simple to reason about (psycopg_pool is not a dependency, and
is not needed for that).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from .errors import StorageUnavailable

Row = dict[str, Any]
Connection = psycopg.AsyncConnection[Row]
# Held while migrating: any constant every replica agrees on.
MIGRATION_LOCK = 0x6D696772

MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    store TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


class SchemaTooNew(RuntimeError):
    """The store's tables are at a version this code does not know."""

    def __init__(self, store: str, found: int, known: int) -> None:
        super().__init__(
            f"the {store} tables are at version {found}, this code knows {known}: "
            "run a newer agenthost"
        )
        self.store, self.found, self.known = store, found, known


async def connect(dsn: str, schema: str) -> Connection:
    """An autocommit connection (transactions are explicit) whose unqualified
    names resolve in `schema`."""
    connection = await psycopg.AsyncConnection.connect(dsn, autocommit=True, row_factory=dict_row)
    await connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return connection


@asynccontextmanager
async def storage_errors() -> AsyncIterator[None]:
    """PostgreSQL unreachable or refusing work (lost connection, shutdown,
    disk full) is the storage being unavailable, not a bug of the call."""
    try:
        yield
    except psycopg.OperationalError as error:
        raise StorageUnavailable(str(error).strip() or type(error).__name__) from error


async def migrate(
    connection: Connection, schema: str, store: str, migrations: Sequence[str]
) -> int:
    """Create `schema` if needed and apply the `migrations` of `store` that
    its tables lack, in one transaction; returns the version now in place.
    Migration n (from 1) is `migrations[n - 1]`; released ones never change,
    a change is a new one at the end."""
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        try:
            async with connection.transaction():  # a savepoint
                await connection.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                )
        except psycopg.errors.UniqueViolation:
            pass  # made at this moment by a store that does not take our lock (an older release)
        await connection.execute(MIGRATIONS_TABLE)
        cursor = await connection.execute(
            "SELECT version FROM schema_migrations WHERE store = %s", (store,)
        )
        row = await cursor.fetchone()
        found = 0 if row is None else int(row["version"])
        if found > len(migrations):
            raise SchemaTooNew(store, found, len(migrations))
        for statement in migrations[found:]:
            await connection.execute(statement)
        if found < len(migrations):
            await connection.execute(
                "INSERT INTO schema_migrations (store, version) VALUES (%s, %s) "
                "ON CONFLICT (store) DO UPDATE SET version = excluded.version, applied_at = now()",
                (store, len(migrations)),
            )
    return len(migrations)


class PostgresConnection:
    """A store's one connection to PostgreSQL. Calls take turns; one that
    finds the connection lost makes a new one, so the store recovers when
    PostgreSQL is back without a restart (the call that met the loss fails
    with StorageUnavailable)."""

    def __init__(self, dsn: str, schema: str, store: str, migrations: Sequence[str]) -> None:
        self.dsn = dsn
        self.schema = schema
        self.store = store
        self._migrations = migrations
        self._connection: Connection | None = None
        self._lock = asyncio.Lock()
        self._open = False

    async def open(self) -> None:
        async with self._lock, storage_errors():
            connection = await self._connected()
            await migrate(connection, self.schema, self.store, self._migrations)
            self._open = True

    async def close(self) -> None:
        async with self._lock:
            self._open = False
            if self._connection is not None:
                await self._connection.close()
                self._connection = None

    async def _connected(self) -> Connection:
        connection = self._connection
        if connection is not None and not (connection.broken or connection.closed):
            return connection
        if connection is not None:
            await connection.close()
        self._connection = None
        self._connection = await connect(self.dsn, self.schema)
        return self._connection

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Connection]:
        """The connection, to this caller alone until the block ends;
        storage failures inside are StorageUnavailable."""
        async with self._lock, storage_errors():
            if not self._open:
                raise RuntimeError(f"the {self.store} store is not open")
            yield await self._connected()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """`session`, inside one transaction (rolled back when the block raises)."""
        async with self.session() as connection, connection.transaction():
            yield connection

    async def fetch(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        async with self.session() as connection:
            cursor = await connection.execute(query, params)
            return await cursor.fetchall()

    async def execute(self, query: str, params: Sequence[Any] = ()) -> int:
        """Run one statement on its own; how many rows it changed."""
        async with self.session() as connection:
            cursor = await connection.execute(query, params)
            return cursor.rowcount

    async def probe(self) -> None:
        """The server answers (on a new connection if the old one was lost)."""
        await self.execute("SELECT 1")


class PostgresStore:
    """What every store on PostgreSQL shares: its connection (`db`), kept
    in `schema`, with its tables at the newest of `MIGRATIONS` (a subclass
    names its STORE and lists its MIGRATIONS; only its SQL is its own)."""

    STORE: str
    MIGRATIONS: Sequence[str]

    def __init__(self, dsn: str, schema: str = "public") -> None:
        self.db = PostgresConnection(dsn, schema, self.STORE, self.MIGRATIONS)

    @property
    def schema(self) -> str:
        return self.db.schema

    async def open(self) -> None:
        await self.db.open()

    async def close(self) -> None:
        await self.db.close()

    async def probe(self) -> None:
        await self.db.probe()
