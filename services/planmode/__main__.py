"""Run the plan-mode service: `python -m services.planmode`.

AGENTHOST_PLANMODE_CONFIG may name a JSON file `{"section": "..."}` with the
policy text shown to the model in plan mode."""

import os
from pathlib import Path

from services.common.main import required, run_service
from services.common.topology import PEERS
from services.sessionlog.client import SessionLogClient

from .config import PlanModeConfig, load_config
from .service import plan_mode_service

config_file = os.environ.get("AGENTHOST_PLANMODE_CONFIG")
plan_config = load_config(Path(config_file)) if config_file else PlanModeConfig()

run_service(
    "planmode",
    lambda config, peers: plan_mode_service(
        SessionLogClient(required(peers, "sessionlog")), plan_config
    ),
    peers=PEERS["planmode"],
)
