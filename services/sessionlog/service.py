"""The session-log service as a ServiceHost definition."""

from __future__ import annotations

from pathlib import Path

import grpc
from agenthost.sessionlog.v1 import session_log_pb2_grpc as pb_grpc

from services.common.server import ServiceDefinition

from .domain import SessionLog
from .servicer import SERVICE_NAME, SessionLogServicer
from .sqlite_store import SqliteSessionStore
from .store import SessionStore


def session_log_service(db_path: Path, store: SessionStore | None = None) -> ServiceDefinition:
    """Storage opens before health turns SERVING and closes after shutdown."""
    store = store or SqliteSessionStore(db_path)
    servicer = SessionLogServicer(SessionLog(store))

    def register(server: grpc.aio.Server) -> None:
        pb_grpc.add_SessionLogServiceServicer_to_server(servicer, server)

    return ServiceDefinition([SERVICE_NAME], register, open=store.open, close=store.close)
