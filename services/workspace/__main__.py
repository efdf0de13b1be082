"""Run the workspace service: `python -m services.workspace`."""

from services.common.main import required, run_service
from services.common.topology import PEERS
from services.sessionlog.client import SessionLogClient

from .service import workspace_service

run_service(
    "workspace",
    lambda config, peers: workspace_service(
        config.data_dir, SessionLogClient(required(peers, "sessionlog"))
    ),
    peers=PEERS["workspace"],
)
