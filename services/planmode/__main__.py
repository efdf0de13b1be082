"""Run the plan-mode service: `python -m services.planmode`."""

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

from .config import PlanModeConfig, load_config
from .service import plan_mode_service


async def serve(config: ServiceConfig, sessionlog: str, plan_config: PlanModeConfig) -> None:
    channel = open_channel(sessionlog)
    try:
        definition = plan_mode_service(config.data_dir, SessionLogClient(channel), plan_config)
        await ServiceHost(config, definition).run_until_signalled()
    finally:
        await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="agenthost plan-mode service")
    parser.add_argument("--listen", help="host:port (env AGENTHOST_LISTEN)")
    parser.add_argument("--data-dir", type=Path, help="data folder (env AGENTHOST_DATA_DIR)")
    parser.add_argument(
        "--sessionlog", default=os.environ.get("AGENTHOST_SESSIONLOG_ADDR", "127.0.0.1:7101")
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=os.environ.get("AGENTHOST_PLANMODE_CONFIG") or None,
        help='JSON file {"section": "..."} (env AGENTHOST_PLANMODE_CONFIG)',
    )
    args = parser.parse_args()
    config = ServiceConfig.from_env("planmode", listen=args.listen, data_dir=args.data_dir)
    configure_logging(config.name, config.log_level)
    plan_config = load_config(args.config) if args.config else PlanModeConfig()
    asyncio.run(serve(config, args.sessionlog, plan_config))


if __name__ == "__main__":
    main()
