"""The plan-mode service as a ServiceHost definition."""

from __future__ import annotations

from pathlib import Path

import grpc
from agenthost.planmode.v1 import plan_mode_pb2_grpc as pb_grpc

from services.common.server import ServiceDefinition
from services.sessionlog.port import SessionLogPort

from .config import PlanModeConfig
from .controller import PlanModeController
from .pending_store import SqlitePendingStore
from .servicer import SERVICE_NAME, PlanModeServicer


def plan_mode_service(
    data_dir: Path, log: SessionLogPort, config: PlanModeConfig | None = None
) -> ServiceDefinition:
    """Pending selections live in planmode.db so they survive a restart."""
    pending = SqlitePendingStore(data_dir / "planmode.db")
    controller = PlanModeController(log, pending, config or PlanModeConfig())
    servicer = PlanModeServicer(controller)

    def register(server: grpc.aio.Server) -> None:
        pb_grpc.add_PlanModeServiceServicer_to_server(servicer, server)

    return ServiceDefinition([SERVICE_NAME], register, open=pending.open, close=pending.close)
