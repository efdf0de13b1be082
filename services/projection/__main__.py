"""Run the projection service: `python -m services.projection`.

It folds the `plan` view only where plan mode is composed: with
AGENTHOST_PLANMODE_ADDR=none (a deployment without plan mode) the key is
absent everywhere. Checkpoints: SQLite under AGENTHOST_DATA_DIR, or the
database AGENTHOST_DATABASE_URL names."""

import os

from services.common.database import database_from_env
from services.common.main import required, run_service
from services.common.topology import ABSENT, ADDRESS_ENV, PEERS
from services.sessionlog.client import SessionLogClient

from .service import projection_service

with_plan_mode = os.environ.get(ADDRESS_ENV["planmode"], "") != ABSENT

run_service(
    "projection",
    lambda config, peers: projection_service(
        config.data_dir,
        SessionLogClient(required(peers, "sessionlog")),
        with_plan_mode=with_plan_mode,
        database=database_from_env(os.environ, config.data_dir),
    ),
    peers=PEERS["projection"],
)
