"""Run the workspace service: `python -m services.workspace`.

SQLite under AGENTHOST_DATA_DIR, or the database AGENTHOST_DATABASE_URL names."""

import os

from services.common.database import database_from_env
from services.common.main import required, run_service
from services.common.topology import PEERS
from services.sessionlog.client import SessionLogClient

from .service import workspace_service

run_service(
    "workspace",
    lambda config, peers: workspace_service(
        config.data_dir,
        SessionLogClient(required(peers, "sessionlog")),
        database=database_from_env(os.environ, config.data_dir),
    ),
    peers=PEERS["workspace"],
)
