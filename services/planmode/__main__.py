"""Run the plan-mode service: `python -m services.planmode`.

AGENTHOST_PLANMODE_CONFIG may name a JSON file `{"section": "..."}` with the
policy text shown to the model in plan mode."""

import os

from services.common.main import required, run_service
from services.common.topology import PEERS
from services.sessionlog.client import SessionLogClient

from .config import config_from_env
from .service import plan_mode_service

plan_config = config_from_env(os.environ)

run_service(
    "planmode",
    lambda config, peers: plan_mode_service(
        SessionLogClient(required(peers, "sessionlog")), plan_config
    ),
    peers=PEERS["planmode"],
)
