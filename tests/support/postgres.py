"""The PostgreSQL server this machine runs (trust auth, database `test`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, runtime_checkable

import psycopg
from psycopg import sql

POSTGRES_DSN = os.environ.get(
    "AGENTHOST_TEST_POSTGRES_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test"
)


@runtime_checkable
class InSchema(Protocol):
    """A PostgreSQL store: it keeps its tables in one schema."""

    @property
    def schema(self) -> str: ...


def schema_for(tmp_path: Path, prefix: str) -> str:
    """A schema for one test (and one process: xdist or parallel runs)."""
    return f"{prefix}_{tmp_path.name.lower().replace('-', '_')}_{os.getpid()}"


async def drop_schema(store: InSchema) -> None:
    schema = store.schema
    async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as db:
        await db.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
