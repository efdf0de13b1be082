"""Run the projection service: `python -m services.projection`."""

from services.common.main import required, run_service
from services.sessionlog.client import SessionLogClient

from .service import projection_service

run_service(
    "projection",
    lambda config, peers: projection_service(
        config.data_dir, SessionLogClient(required(peers, "sessionlog"))
    ),
    peers=["sessionlog"],
)
