"""Run the session-log service: `python -m services.sessionlog`.

SQLite under AGENTHOST_DATA_DIR, or the database AGENTHOST_DATABASE_URL names
(AGENTHOST_SESSIONLOG_DSN, when set, puts the session log alone in PostgreSQL)."""

import os

from services.common.main import run_service

from .service import session_log_service, store_from_env

run_service(
    "sessionlog",
    lambda config, peers: session_log_service(
        config.data_dir / "sessionlog.db", store_from_env(config.data_dir, os.environ)
    ),
)
