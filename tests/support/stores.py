"""The storage backends the contract suites run on, opened fresh for each
test (a SQLite file in tmp_path, a schema of its own in PostgreSQL): the
session log's, the workspace store's and the projection checkpoints'."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from services.projection.checkpoint_store import CheckpointStore, SqliteCheckpointStore
from services.projection.postgres_checkpoint_store import PostgresCheckpointStore
from services.sessionlog.domain import SessionLog
from services.sessionlog.group_commit import CommitStats
from services.sessionlog.postgres_store import PostgresSessionStore
from services.sessionlog.search import SearchStore
from services.sessionlog.search_postgres import PostgresSearchStore
from services.sessionlog.search_sqlite import SqliteSearchStore
from services.sessionlog.sqlite_store import SqliteSessionStore
from services.workspace.postgres_store import PostgresWorkspaceStore
from services.workspace.store import SqliteWorkspaceStore, WorkspaceStore
from tests.support.postgres import POSTGRES_DSN, InSchema, drop_schema, schema_for

Store = SqliteSessionStore | PostgresSessionStore


def sqlite_backend(tmp_path: Path) -> Callable[[], Store]:
    return lambda: SqliteSessionStore(tmp_path / "sessionlog.db")


def postgres_backend(tmp_path: Path) -> Callable[[], Store]:
    """The PostgreSQL on this machine, one fresh schema per test."""
    schema = schema_for(tmp_path, "contract")
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

    @asynccontextmanager
    async def another(self) -> AsyncIterator[Store]:
        """A second store on the same data, open beside the log's (what
        another process would read from it)."""
        store = self._make_store()
        await store.open()
        try:
            yield store
        finally:
            await store.close()

    async def clean(self) -> None:
        """Remove what an earlier run may have left (a PostgreSQL schema)."""
        if isinstance(probe := self._make_store(), PostgresSessionStore):
            await drop_schema(probe)

    async def close(self) -> None:
        for store in self._opened:
            await store.close()
        self._opened.clear()


class Openable(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...


S = TypeVar("S", bound=Openable)


class StoreBackend(Generic[S]):
    """Opens stores of one backend on the same data: each `opened()` after
    the first is a restart. `clean` drops what a PostgreSQL test left."""

    def __init__(self, make: Callable[[], S]) -> None:
        self.make = make

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[S]:
        store = self.make()
        await store.open()
        try:
            yield store
        finally:
            await store.close()

    async def clean(self) -> None:
        if isinstance(probe := self.make(), InSchema):
            await drop_schema(probe)

    @asynccontextmanager
    async def cleaned(self) -> AsyncIterator[StoreBackend[S]]:
        """This backend, with nothing left before or after (a fixture's body)."""
        await self.clean()
        try:
            yield self
        finally:
            await self.clean()


def workspace_store_backend(name: str, tmp_path: Path) -> StoreBackend[WorkspaceStore]:
    if name == "postgres":
        schema = schema_for(tmp_path, "workspace")
        return StoreBackend(lambda: PostgresWorkspaceStore(POSTGRES_DSN, schema))
    return StoreBackend(lambda: SqliteWorkspaceStore(tmp_path / "workspace.db"))


STORE_BACKENDS = ("postgres", "sqlite")


def checkpoint_store_backend(name: str, tmp_path: Path) -> StoreBackend[CheckpointStore]:
    if name == "postgres":
        schema = schema_for(tmp_path, "projection")
        return StoreBackend(lambda: PostgresCheckpointStore(POSTGRES_DSN, schema))
    return StoreBackend(lambda: SqliteCheckpointStore(tmp_path / "projection.db"))


def search_store_backend(name: str, tmp_path: Path) -> StoreBackend[SearchStore]:
    """The search index on a backend (a schema of its own on PostgreSQL, so
    a test can drop it and keep the log's)."""
    if name == "postgres":
        schema = schema_for(tmp_path, "search")
        return StoreBackend(lambda: PostgresSearchStore(POSTGRES_DSN, schema))
    return StoreBackend(lambda: SqliteSearchStore(tmp_path / "search.db"))
