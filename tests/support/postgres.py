"""The PostgreSQL server this machine runs (trust auth, database `test`)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import quote, urlencode

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

POSTGRES_DSN = os.environ.get(
    "AGENTHOST_TEST_POSTGRES_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test"
)


def postgres_url(dsn: str = POSTGRES_DSN) -> str:
    """The DSN as AGENTHOST_DATABASE_URL takes it (postgresql://…)."""
    if dsn.startswith(("postgresql://", "postgres://")):
        return dsn
    parts = conninfo_to_dict(dsn)
    user = quote(str(parts.pop("user", "")), safe="")
    password = parts.pop("password", None)
    auth = f"{user}:{quote(str(password), safe='')}@" if password else f"{user}@" if user else ""
    host, port = str(parts.pop("host", "localhost")), parts.pop("port", "5432")
    if host.startswith("/"):  # a socket folder has no place in the URL's authority
        parts["host"], host = host, ""
    dbname = quote(str(parts.pop("dbname", "")), safe="")
    query = urlencode({k: str(v) for k, v in parts.items()})
    return f"postgresql://{auth}{host}:{port}/{dbname}" + (f"?{query}" if query else "")


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


@dataclass(frozen=True)
class SchemaName:
    schema: str


@asynccontextmanager
async def stack_on_postgres(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> AsyncIterator[str]:
    """The stack's database setting (as a deployment sets it) points at a
    fresh schema of this test's own, dropped afterwards; its name."""
    schema = SchemaName(schema_for(tmp_path, prefix))
    await drop_schema(schema)
    monkeypatch.setenv("AGENTHOST_DATABASE_URL", postgres_url())
    monkeypatch.setenv("AGENTHOST_DATABASE_SCHEMA", schema.schema)
    monkeypatch.delenv("AGENTHOST_SESSIONLOG_DSN", raising=False)
    try:
        yield schema.schema
    finally:
        await drop_schema(schema)
