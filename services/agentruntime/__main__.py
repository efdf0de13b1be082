"""Run the agent runtime: `python -m services.agentruntime`.

It needs the session log and, unless its address is "none", plan mode. The
models come from the models file (models/catalog.py: AGENTHOST_MODELS_FILE,
else models.toml in the data folder), else from the environment
(models/factory.py): the built-in model unless AGENTHOST_MODEL_BASE_URL
names an OpenAI-compatible API. Session leases
last AGENTHOST_LEASE_S seconds (10) unless renewed (leases.py)."""

import os

from services.common.config import ServiceConfig
from services.common.main import Peers, required, run_service
from services.common.server import ServiceDefinition
from services.common.topology import PEERS
from services.planmode.client import PlanModeClient
from services.planmode.config import config_from_env
from services.sessionlog.client import SessionLogClient

from .leases import lease_s_from_env
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
    return agent_runtime_service(
        log, models, plan, lease_s_from_env(os.environ), idle_s_from_env(os.environ)
    )


run_service("agentruntime", build, peers=PEERS["agentruntime"])
