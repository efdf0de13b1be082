"""The session-log service as a ServiceHost definition."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import grpc
from agenthost.sessionlog.v1 import session_log_pb2_grpc as pb_grpc

from services.common.database import (
    DATABASE_SCHEMA_ENV,
    DEFAULT_SCHEMA,
    Backend,
    Database,
    database_from_env,
)
from services.common.server import ServiceDefinition
from services.common.tasks import spawn

from .domain import SessionLog, now_us
from .search import SearchStore
from .search_sqlite import SqliteSearchStore
from .servicer import SERVICE_NAME, SessionLogServicer
from .sqlite_store import SqliteSessionStore
from .store import SessionStore


def session_log_service(
    db_path: Path, store: SessionStore | None = None, clock: Callable[[], int] = now_us
) -> ServiceDefinition:
    """Storage opens before health turns SERVING and closes after shutdown;
    on a shared store (PostgreSQL) appends by other replicas wake our
    subscribers."""
    store = store or SqliteSessionStore(db_path)
    search = search_store(store)
    log = SessionLog(store, clock, search)
    servicer = SessionLogServicer(log)
    feed: list[asyncio.Task[None]] = []

    def register(server: grpc.aio.Server) -> None:
        pb_grpc.add_SessionLogServiceServicer_to_server(servicer, server)

    async def open_store() -> None:
        await store.open()
        feed.append(spawn(log.follow_shared_store(), name="sessionlog-feed"))
        feed.append(spawn(log.maintain_checkpoints(), name="sessionlog-checkpoints"))
        if log.search is not None:
            await log.search.store.open()
            feed.append(spawn(log.search.follow(), name="sessionlog-search"))

    async def close_store() -> None:
        for task in feed:
            task.cancel()
        await asyncio.gather(*feed, return_exceptions=True)
        if log.search is not None:
            await log.search.store.close()
        await store.close()

    return ServiceDefinition(
        [SERVICE_NAME],
        register,
        open=open_store,
        close=close_store,
        before_stop=[log.end_streams],
        probe=store.probe,
        stats=log.stats,
    )


def search_store(store: SessionStore) -> SearchStore | None:
    """The full-text index beside the log: `search.db` next to its SQLite
    file, or tables in its PostgreSQL schema (none for another store)."""
    if isinstance(store, SqliteSessionStore):
        return SqliteSearchStore(store.path.parent / "search.db")
    # Only a process that made a PostgreSQL store has loaded it (and psycopg).
    postgres = sys.modules.get("services.sessionlog.postgres_store")
    if postgres is not None and isinstance(store, postgres.PostgresSessionStore):
        from .search_postgres import PostgresSearchStore

        return PostgresSearchStore(store.dsn, store.schema)
    return None


# Older than AGENTHOST_DATABASE_URL and kept working: they put the session
# log alone in PostgreSQL, and win over the stack's setting for it.
SESSIONLOG_DSN_ENV = "AGENTHOST_SESSIONLOG_DSN"
SESSIONLOG_SCHEMA_ENV = "AGENTHOST_SESSIONLOG_SCHEMA"


def store_from_env(data_dir: Path, env: Mapping[str, str]) -> SessionStore:
    """The stack's database (AGENTHOST_DATABASE_URL, else SQLite in data_dir),
    or PostgreSQL at AGENTHOST_SESSIONLOG_DSN when that is set."""
    dsn = env.get(SESSIONLOG_DSN_ENV)
    if dsn:
        schema = env.get(SESSIONLOG_SCHEMA_ENV) or env.get(DATABASE_SCHEMA_ENV) or DEFAULT_SCHEMA
        return session_store(Database.postgres(dsn, schema))
    return session_store(database_from_env(env, data_dir))


def session_store(database: Database) -> SessionStore:
    if database.backend is Backend.POSTGRES:
        from .postgres_store import PostgresSessionStore  # psycopg only when it is used

        return PostgresSessionStore(database.postgres_dsn(), database.schema)
    return SqliteSessionStore(database.sqlite_file("sessionlog.db"))
