"""Run the session-log service: `python -m services.sessionlog`."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from services.common.config import ServiceConfig
from services.common.logs import configure_logging
from services.common.server import ServiceHost

from .service import session_log_service


def main() -> None:
    parser = argparse.ArgumentParser(description="agenthost session-log service")
    parser.add_argument("--listen", help="host:port (env AGENTHOST_LISTEN)")
    parser.add_argument("--data-dir", type=Path, help="data folder (env AGENTHOST_DATA_DIR)")
    args = parser.parse_args()
    config = ServiceConfig.from_env("sessionlog", listen=args.listen, data_dir=args.data_dir)
    configure_logging(config.name, config.log_level)
    host = ServiceHost(config, session_log_service(config.data_dir / "sessionlog.db"))
    asyncio.run(host.run_until_signalled())


if __name__ == "__main__":
    main()
