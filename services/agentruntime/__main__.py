"""Run the agent runtime: `python -m services.agentruntime`.

AGENTHOST_SESSIONLOG_ADDR and AGENTHOST_PLANMODE_ADDR name the services it
uses ("none" runs without plan mode); the model comes from the environment
(see models/factory.py: the built-in model unless AGENTHOST_MODEL_BASE_URL).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from services.common.client import open_channel
from services.common.config import ServiceConfig
from services.common.logs import configure_logging
from services.common.server import ServiceHost
from services.planmode.client import PlanModeClient
from services.sessionlog.client import SessionLogClient

from .models.factory import adapter_from_env
from .plan_port import RemotePlanMode
from .service import agent_runtime_service


async def serve(config: ServiceConfig, sessionlog: str, planmode: str) -> None:
    log_channel = open_channel(sessionlog)
    plan_channel = open_channel(planmode) if planmode != "none" else None
    try:
        plan = RemotePlanMode(PlanModeClient(plan_channel)) if plan_channel else None
        definition = agent_runtime_service(SessionLogClient(log_channel), adapter_from_env(), plan)
        await ServiceHost(config, definition).run_until_signalled()
    finally:
        await log_channel.close()
        if plan_channel is not None:
            await plan_channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="agenthost agent runtime")
    parser.add_argument("--listen", help="host:port (env AGENTHOST_LISTEN)")
    parser.add_argument("--data-dir", type=Path, help="data folder (env AGENTHOST_DATA_DIR)")
    parser.add_argument(
        "--sessionlog", default=os.environ.get("AGENTHOST_SESSIONLOG_ADDR", "127.0.0.1:7101")
    )
    parser.add_argument(
        "--planmode",
        default=os.environ.get("AGENTHOST_PLANMODE_ADDR", "127.0.0.1:7102"),
        help='host:port of plan mode, or "none"',
    )
    args = parser.parse_args()
    config = ServiceConfig.from_env("agentruntime", listen=args.listen, data_dir=args.data_dir)
    configure_logging(config.name, config.log_level)
    asyncio.run(serve(config, args.sessionlog, args.planmode))


if __name__ == "__main__":
    main()
