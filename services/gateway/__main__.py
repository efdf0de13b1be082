"""Run the gateway: `python -m services.gateway`.

Peers by AGENTHOST_<PEER>_ADDR (plan mode may be "none": a deployment without
it). Tokens: AGENTHOST_TOKENS_FILE, a JSON object of token -> account; without
it a local token is made in AGENTHOST_DATA_DIR/token for the account "local".
Browsers (gRPC-Web, Connect): at AGENTHOST_WEB_LISTEN when it is set, for the
origins in AGENTHOST_WEB_ORIGINS (see services/common/config.py); its log
line "web listening" gives the URL. Its fences: in memory, or shared with
the other gateway replicas in PostgreSQL when AGENTHOST_DATABASE_URL names
one (services/common/database.py).
"""

import logging
import os
from pathlib import Path

from agenthost.projection.v1 import projection_pb2_grpc

from services.common.client import open_channel
from services.common.config import ServiceConfig
from services.common.database import database_from_env
from services.common.main import Peers, required, run_service
from services.common.server import ServiceDefinition
from services.common.topology import PEERS
from services.planmode.client import PlanModeClient
from services.sessionlog.client import SessionLogClient
from services.workspace.client import WorkspaceClient

from .accounts import LOCAL_ACCOUNT, TokenStore, ensure_local_token
from .runtimes import RuntimeReplicas
from .service import gateway_service


def load_tokens(data_dir: Path) -> TokenStore:
    tokens_file = os.environ.get("AGENTHOST_TOKENS_FILE")
    if tokens_file:
        return TokenStore.load(Path(tokens_file))
    path = data_dir / "token"
    token = ensure_local_token(path)
    logging.getLogger("agenthost.gateway").info("local token", extra={"token_file": str(path)})
    return TokenStore({token: LOCAL_ACCOUNT})


def build(config: ServiceConfig, peers: Peers) -> ServiceDefinition:
    plan_channel = peers["planmode"]
    return gateway_service(
        load_tokens(config.data_dir),
        SessionLogClient(required(peers, "sessionlog")),
        WorkspaceClient(required(peers, "workspace")),
        runtime_replicas(config, peers),
        projection_pb2_grpc.ProjectionServiceStub(required(peers, "projection")),
        PlanModeClient(plan_channel) if plan_channel else None,
        database=database_from_env(os.environ, config.data_dir),
    )


def runtime_replicas(config: ServiceConfig, peers: Peers) -> RuntimeReplicas:
    """The runtime's replicas: the names of its address may stand for several."""
    required(peers, "agentruntime")
    return RuntimeReplicas(
        config.peer_addresses["agentruntime"],
        lambda address: open_channel(address, config.internal_token),
    )


run_service("gateway", build, peers=PEERS["gateway"])
