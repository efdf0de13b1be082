"""Run the workspace service: `python -m services.workspace`."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from services.common.client import open_channel
from services.common.config import ServiceConfig
from services.common.logs import configure_logging
from services.common.server import ServiceHost
from services.sessionlog.client import SessionLogClient

from .service import workspace_service

DEFAULT_SESSIONLOG = "127.0.0.1:7101"


async def serve(config: ServiceConfig, sessionlog: str) -> None:
    # The channel is made here: grpc.aio binds it to the running loop.
    channel = open_channel(sessionlog)
    try:
        definition = workspace_service(config.data_dir, SessionLogClient(channel))
        await ServiceHost(config, definition).run_until_signalled()
    finally:
        await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="agenthost workspace service")
    parser.add_argument("--listen", help="host:port (env AGENTHOST_LISTEN)")
    parser.add_argument("--data-dir", type=Path, help="data folder (env AGENTHOST_DATA_DIR)")
    parser.add_argument(
        "--sessionlog",
        default=os.environ.get("AGENTHOST_SESSIONLOG_ADDR", DEFAULT_SESSIONLOG),
        help="session-log address host:port (env AGENTHOST_SESSIONLOG_ADDR)",
    )
    args = parser.parse_args()
    config = ServiceConfig.from_env("workspace", listen=args.listen, data_dir=args.data_dir)
    configure_logging(config.name, config.log_level)
    asyncio.run(serve(config, args.sessionlog))


if __name__ == "__main__":
    main()
