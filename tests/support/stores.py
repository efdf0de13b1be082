"""The session-log storage backends the contract suite runs on, opened fresh
for each test (a SQLite file in tmp_path, a schema of its own in PostgreSQL)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from services.sessionlog.domain import SessionLog
from services.sessionlog.group_commit import CommitStats
from services.sessionlog.postgres_store import PostgresSessionStore
from services.sessionlog.sqlite_store import SqliteSessionStore
from tests.support.postgres import POSTGRES_DSN, drop_schema

Store = SqliteSessionStore | PostgresSessionStore


def sqlite_backend(tmp_path: Path) -> Callable[[], Store]:
    return lambda: SqliteSessionStore(tmp_path / "sessionlog.db")


def postgres_backend(tmp_path: Path) -> Callable[[], Store]:
    """The PostgreSQL on this machine, one fresh schema per test."""
    schema = f"contract_{tmp_path.name.lower().replace('-', '_')}_{os.getpid()}"
    return lambda: PostgresSessionStore(POSTGRES_DSN, schema)


BACKENDS = {"sqlite": sqlite_backend, "postgres": postgres_backend}


class OpenLog:
    """Opens the log on a backend; calling it again simulates a restart."""

    def __init__(self, make_store: Callable[[], Store]) -> None:
        self._make_store = make_store
        self._opened: list[Store] = []

    async def __call__(self) -> SessionLog:
        await self.close()
        store = self._make_store()
        await store.open()
        self._opened.append(store)
        return SessionLog(store)

    @property
    def opened(self) -> bool:
        return bool(self._opened)

    @property
    def store(self) -> Store:
        """The store the last call opened."""
        return self._opened[-1]

    @property
    def stats(self) -> CommitStats:
        return self.store.stats

    async def clean(self) -> None:
        """Remove what an earlier run may have left (a PostgreSQL schema)."""
        if isinstance(probe := self._make_store(), PostgresSessionStore):
            await drop_schema(probe)

    async def close(self) -> None:
        for store in self._opened:
            await store.close()
        self._opened.clear()
