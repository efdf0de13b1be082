"""The gateway as a ServiceHost definition."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.projection.v1 import projection_pb2_grpc as pj_grpc
from agenthost.runtime.v1 import runtime_pb2_grpc as rt_grpc

from services.common.server import ServiceDefinition
from services.planmode.client import PlanModeClient
from services.sessionlog.port import SessionLogPort
from services.workspace.client import WorkspaceClient

from .accounts import TokenStore, current_account
from .servicer import HEARTBEAT_S, SERVICE_NAME, GatewayServicer


def gateway_service(
    tokens: TokenStore,
    log: SessionLogPort,
    workspaces: WorkspaceClient,
    runtime: rt_grpc.AgentRuntimeServiceStub,
    projection: pj_grpc.ProjectionServiceStub,
    plan: PlanModeClient | None,
    heartbeat_s: float = HEARTBEAT_S,
) -> ServiceDefinition:
    """Serving once it follows the session log live; without a plan-mode
    client, PlanMode/SetPlanMode answer "unavailable"."""
    servicer = GatewayServicer(log, workspaces, runtime, projection, plan, heartbeat_s)

    def register(server: grpc.aio.Server) -> None:
        gw_grpc.add_GatewayServiceServicer_to_server(servicer, server)

    def authenticate(context: grpc.aio.ServicerContext) -> None:
        metadata = dict(context.invocation_metadata() or ())
        authorization = metadata.get("authorization")
        current_account.set(
            tokens.account_for(authorization if isinstance(authorization, str) else None)
        )

    return GatewayDefinition(
        [SERVICE_NAME],
        register,
        open=servicer.hub.start,
        before_stop=[servicer.hub.stop],
        authenticate=authenticate,
        web=True,
        servicer=servicer,
    )


@dataclass
class GatewayDefinition(ServiceDefinition):
    """The definition plus the servicer, for tests and benchmarks."""

    servicer: GatewayServicer | None = None
