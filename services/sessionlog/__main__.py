"""Run the session-log service: `python -m services.sessionlog`."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from services.common.config import ServiceConfig
from services.common.logs import configure_logging
from services.common.server import ServiceHost

from .service import session_log_service, store_from_env


def main() -> None:
    parser = argparse.ArgumentParser(description="agenthost session-log service")
    parser.add_argument("--listen", help="host:port (env AGENTHOST_LISTEN)")
    parser.add_argument("--data-dir", type=Path, help="data folder (env AGENTHOST_DATA_DIR)")
    args = parser.parse_args()
    config = ServiceConfig.from_env("sessionlog", listen=args.listen, data_dir=args.data_dir)
    configure_logging(config.name, config.log_level)
    store = store_from_env(config.data_dir, os.environ)
    host = ServiceHost(config, session_log_service(config.data_dir / "sessionlog.db", store))
    asyncio.run(host.run_until_signalled())


if __name__ == "__main__":
    main()
