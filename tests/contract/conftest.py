"""The storage backends every contract test runs on."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from services.sessionlog.domain import SessionLog
from services.sessionlog.postgres_store import PostgresSessionStore
from services.sessionlog.sqlite_store import SqliteSessionStore
from services.sessionlog.store import SessionStore
from tests.support.postgres import POSTGRES_DSN, drop_schema

OpenLog = Callable[[], Awaitable[SessionLog]]


def sqlite_backend(tmp_path: Path) -> Callable[[], SessionStore]:
    return lambda: SqliteSessionStore(tmp_path / "sessionlog.db")


def postgres_backend(tmp_path: Path) -> Callable[[], PostgresSessionStore]:
    """The PostgreSQL on this machine, one fresh schema per test."""
    schema = f"contract_{tmp_path.name.lower().replace('-', '_')}_{os.getpid()}"
    return lambda: PostgresSessionStore(POSTGRES_DSN, schema)


BACKENDS = {"sqlite": sqlite_backend, "postgres": postgres_backend}


@pytest.fixture(params=sorted(BACKENDS))
async def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OpenLog]:
    """Opens the log on the backend; calling it again simulates a restart."""
    make_store = BACKENDS[request.param](tmp_path)
    if isinstance(probe := make_store(), PostgresSessionStore):
        await drop_schema(probe)
    opened: list[SessionStore] = []

    async def open_log() -> SessionLog:
        for store in opened:
            await store.close()
        opened.clear()
        store = make_store()
        await store.open()
        opened.append(store)
        return SessionLog(store)

    yield open_log
    for store in opened:
        await store.close()
    if isinstance(probe, PostgresSessionStore):
        await drop_schema(probe)


@pytest.fixture
async def log(reopen: OpenLog) -> SessionLog:
    return await reopen()
