"""The gateway as a ServiceHost definition."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.projection.v1 import projection_pb2_grpc as pj_grpc

from services.common.database import Backend, Database, postgres_probe
from services.common.server import ServiceDefinition
from services.planmode.client import PlanModeClient
from services.sessionlog.port import SessionLogPort
from services.workspace.client import WorkspaceClient

from .accounts import TokenStore, current_account
from .fence_store import FenceStore, MemoryFenceStore
from .fencing import Fences
from .runtimes import RuntimeReplicas
from .servicer import HEARTBEAT_S, SERVICE_NAME, GatewayServicer


def gateway_service(
    tokens: TokenStore,
    log: SessionLogPort,
    workspaces: WorkspaceClient,
    runtime: RuntimeReplicas,
    projection: pj_grpc.ProjectionServiceStub,
    plan: PlanModeClient | None,
    heartbeat_s: float = HEARTBEAT_S,
    database: Database | None = None,
) -> ServiceDefinition:
    """Serving once it follows the session log live; without a plan-mode
    client, PlanMode/SetPlanMode answer "unavailable". Its fences are in
    memory, or shared with the other gateways when the stack's `database`
    is PostgreSQL (fence_store.py)."""
    store = fence_store(database)
    servicer = GatewayServicer(
        log, workspaces, runtime, projection, plan, heartbeat_s, Fences(store)
    )

    async def close() -> None:
        await store.close()
        await runtime.close()

    async def open_() -> None:
        await store.open()
        await servicer.hub.start()

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
        open=open_,
        close=close,
        before_stop=[servicer.hub.stop],
        authenticate=authenticate,
        # PostgreSQL: NOT_SERVING while the fences cannot be reached.
        probe=postgres_probe(store),
        web=True,
        servicer=servicer,
    )


def fence_store(database: Database | None) -> FenceStore:
    """Shared by the gateways of a stack on PostgreSQL; else this one's own."""
    if database is not None and database.backend is Backend.POSTGRES:
        from .postgres_fences import PostgresFenceStore  # psycopg only when it is used

        return PostgresFenceStore(database.postgres_dsn(), database.schema)
    return MemoryFenceStore()


@dataclass
class GatewayDefinition(ServiceDefinition):
    """The definition plus the servicer, for tests and benchmarks."""

    servicer: GatewayServicer | None = None
