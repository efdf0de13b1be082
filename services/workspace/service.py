"""The workspace service as a ServiceHost definition."""

from __future__ import annotations

from pathlib import Path

import grpc
from agenthost.workspace.v1 import workspace_pb2_grpc as pb_grpc

from services.common.server import ServiceDefinition
from services.sessionlog.port import SessionLogPort

from .domain import Clock, Workspaces, now_us
from .servicer import SERVICE_NAME, WorkspaceServicer
from .store import SqliteWorkspaceStore


def workspace_service(
    data_dir: Path, log: SessionLogPort, *, clock: Clock = now_us
) -> ServiceDefinition:
    """Workspaces and memberships live in `data_dir/workspace.db` (opened
    before health turns SERVING, closed after shutdown); sessions are created
    in and resolved through `log`. `clock` stamps workspace creation times."""
    store = SqliteWorkspaceStore(data_dir / "workspace.db")
    servicer = WorkspaceServicer(Workspaces(log, store, clock))

    def register(server: grpc.aio.Server) -> None:
        pb_grpc.add_WorkspaceServiceServicer_to_server(servicer, server)

    return ServiceDefinition([SERVICE_NAME], register, open=store.open, close=store.close)
