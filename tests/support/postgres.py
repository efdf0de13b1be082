"""The PostgreSQL server this machine runs (trust auth, database `test`)."""

from __future__ import annotations

import os

import psycopg
from psycopg import sql

from services.sessionlog.postgres_store import PostgresSessionStore

POSTGRES_DSN = os.environ.get(
    "AGENTHOST_TEST_POSTGRES_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test"
)


async def drop_schema(store: PostgresSessionStore) -> None:
    await drop_schema_named(store.schema)


async def drop_schema_named(schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as db:
        await db.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
