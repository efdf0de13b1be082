"""The plan-mode service as a ServiceHost definition."""

from __future__ import annotations

import grpc
from agenthost.planmode.v1 import plan_mode_pb2_grpc as pb_grpc

from services.common.server import ServiceDefinition
from services.sessionlog.port import SessionLogPort

from .config import PlanModeConfig
from .controller import PlanModeController
from .servicer import SERVICE_NAME, PlanModeServicer


def plan_mode_service(
    log: SessionLogPort, config: PlanModeConfig | None = None
) -> ServiceDefinition:
    """No storage of its own: everything plan mode knows is in the log."""
    controller = PlanModeController(log, config or PlanModeConfig())
    servicer = PlanModeServicer(controller)

    def register(server: grpc.aio.Server) -> None:
        pb_grpc.add_PlanModeServiceServicer_to_server(servicer, server)

    return ServiceDefinition([SERVICE_NAME], register)
