"""Run the agent runtime: `python -m services.agentruntime`.

It needs the session log and, unless their address is "none", plan mode
and the workspace service (which sessions share workspace permission
rules). MCP servers come from AGENTHOST_MCP_CONFIG or <data dir>/mcp.json and each
workspace's .agenthost/mcp.json (mcp/config.py). The models come from the
models file (models/catalog.py: AGENTHOST_MODELS_FILE, else models.toml in the
data folder), else from the environment (models/factory.py): the built-in model
unless AGENTHOST_MODEL_BASE_URL names an OpenAI-compatible API. Session leases
last AGENTHOST_LEASE_S seconds (10) unless renewed (leases.py)."""

import os

from services.common.config import ServiceConfig
from services.common.main import Peers, required, run_service
from services.common.server import ServiceDefinition
from services.common.topology import PEERS
from services.planmode.client import PlanModeClient
from services.planmode.config import config_from_env
from services.sessionlog.client import SessionLogClient
from services.workspace.client import WorkspaceClient

from .leases import lease_s_from_env
from .mcp import McpServers
from .mcp.config import deployment_path
from .models.catalog import catalog_from_env
from .plan_port import RemotePlanMode
from .runtime import idle_s_from_env
from .service import agent_runtime_service


def build(config: ServiceConfig, peers: Peers) -> ServiceDefinition:
    plan_channel = peers["planmode"]
    plan_config = config_from_env(os.environ)
    plan = RemotePlanMode(PlanModeClient(plan_channel), plan_config) if plan_channel else None
    log = SessionLogClient(required(peers, "sessionlog"))
    models = catalog_from_env(os.environ, config.data_dir)
    lease_s = lease_s_from_env(os.environ)
    workspace_channel = peers["workspace"]
    workspaces = WorkspaceClient(workspace_channel) if workspace_channel else None
    mcp = McpServers(deployment_path(os.environ, config.data_dir))
    idle_s = idle_s_from_env(os.environ)
    return agent_runtime_service(
        log, models, plan, lease_s, config.data_dir, workspaces, mcp=mcp, idle_s=idle_s
    )


run_service("agentruntime", build, peers=PEERS["agentruntime"])
