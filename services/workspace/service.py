"""The workspace service as a ServiceHost definition."""

from __future__ import annotations

from pathlib import Path

import grpc
from agenthost.workspace.v1 import workspace_pb2_grpc as pb_grpc

from services.common.database import Backend, Database, postgres_probe
from services.common.server import ServiceDefinition
from services.sessionlog.port import SessionLogPort

from .domain import Clock, Workspaces, now_us
from .servicer import SERVICE_NAME, WorkspaceServicer
from .store import SqliteWorkspaceStore, WorkspaceStore


def workspace_service(
    data_dir: Path,
    log: SessionLogPort,
    *,
    clock: Clock = now_us,
    database: Database | None = None,
) -> ServiceDefinition:
    """Workspaces and memberships live in `database` (by default SQLite:
    `data_dir/workspace.db`; opened before health turns SERVING, closed after
    shutdown); sessions are created in and resolved through `log`. `clock`
    stamps workspace creation times."""
    store = workspace_store(database or Database.sqlite(data_dir))
    servicer = WorkspaceServicer(Workspaces(log, store, clock))

    def register(server: grpc.aio.Server) -> None:
        pb_grpc.add_WorkspaceServiceServicer_to_server(servicer, server)

    # PostgreSQL: health turns NOT_SERVING while the server is away and back
    # once a probe reaches it (SQLite is a local file: no probe).
    probe = postgres_probe(store)
    return ServiceDefinition(
        [SERVICE_NAME], register, open=store.open, close=store.close, probe=probe
    )


def workspace_store(database: Database) -> WorkspaceStore:
    if database.backend is Backend.POSTGRES:
        from .postgres_store import PostgresWorkspaceStore  # psycopg only when it is used

        return PostgresWorkspaceStore(database.postgres_dsn(), database.schema)
    return SqliteWorkspaceStore(database.sqlite_file("workspace.db"))
