"""Migrations of a PostgreSQL store, on the server this machine runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.common.errors import StorageUnavailable
from services.common.postgres import PostgresConnection, SchemaTooNew, connect, migrate
from tests.support.postgres import POSTGRES_DSN, drop_schema, schema_for

pytestmark = pytest.mark.postgres

V1 = "CREATE TABLE things (id TEXT PRIMARY KEY)"
V2 = "ALTER TABLE things ADD COLUMN size INTEGER NOT NULL DEFAULT 0"


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[PostgresConnection]:
    db = PostgresConnection(POSTGRES_DSN, schema_for(tmp_path, "migrations"), "things", (V1,))
    await drop_schema(db)
    yield db
    await db.close()
    await drop_schema(db)


async def versions(db: PostgresConnection) -> dict[str, int]:
    rows = await db.fetch("SELECT store, version FROM schema_migrations")
    return {row["store"]: row["version"] for row in rows}


async def test_a_new_migration_is_applied_once_and_old_ones_never_again(
    database: PostgresConnection,
) -> None:
    await database.open()
    await database.execute("INSERT INTO things (id) VALUES ('a')")
    await database.close()

    newer = PostgresConnection(database.dsn, database.schema, "things", (V1, V2))
    await newer.open()
    await newer.close()
    await newer.open()  # nothing left to apply: V2 is not run twice
    try:
        assert await newer.fetch("SELECT id, size FROM things") == [{"id": "a", "size": 0}]
        assert await versions(newer) == {"things": 2}
    finally:
        await newer.close()


async def test_replicas_starting_together_migrate_once(database: PostgresConnection) -> None:
    replicas = [
        PostgresConnection(database.dsn, database.schema, "things", (V1, V2)) for _ in range(4)
    ]
    await asyncio.gather(*(replica.open() for replica in replicas))
    try:
        assert await versions(replicas[0]) == {"things": 2}
    finally:
        for replica in replicas:
            await replica.close()


async def test_code_older_than_the_tables_refuses_to_start(database: PostgresConnection) -> None:
    connection = await connect(database.dsn, database.schema)
    async with connection:
        await migrate(connection, database.schema, "things", (V1, V2))
        with pytest.raises(SchemaTooNew) as refused:
            await migrate(connection, database.schema, "things", (V1,))
    assert (refused.value.found, refused.value.known) == (2, 1)


async def test_an_unreachable_server_is_storage_unavailable(tmp_path: Path) -> None:
    nowhere = PostgresConnection(
        "host=127.0.0.1 port=1 user=postgres dbname=test connect_timeout=2", "x", "things", (V1,)
    )
    with pytest.raises(StorageUnavailable):
        await nowhere.open()


async def test_a_lost_connection_is_made_again_by_the_next_call(
    database: PostgresConnection,
) -> None:
    await database.open()
    (row,) = await database.fetch("SELECT pg_backend_pid() AS pid")
    killer = await connect(database.dsn, database.schema)
    async with killer:
        await killer.execute("SELECT pg_terminate_backend(%s)", (row["pid"],))

    with pytest.raises(StorageUnavailable):
        await database.fetch("SELECT 1")
    assert await database.fetch("SELECT 1 AS one") == [{"one": 1}]
