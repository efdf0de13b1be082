"""Run the gateway: `python -m services.gateway`.

Peers: AGENTHOST_SESSIONLOG_ADDR, AGENTHOST_WORKSPACE_ADDR,
AGENTHOST_RUNTIME_ADDR, AGENTHOST_PROJECTION_ADDR and AGENTHOST_PLANMODE_ADDR
("none": a deployment without plan mode). Tokens: AGENTHOST_TOKENS_FILE, a
JSON object of token -> account; without it a local token is made in
AGENTHOST_DATA_DIR/token for the account "local".
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from pathlib import Path

from agenthost.projection.v1 import projection_pb2_grpc
from agenthost.runtime.v1 import runtime_pb2_grpc

from services.common.client import open_channel
from services.common.config import ServiceConfig
from services.common.logs import configure_logging
from services.common.server import ServiceHost
from services.planmode.client import PlanModeClient
from services.sessionlog.client import SessionLogClient
from services.workspace.client import WorkspaceClient

from .accounts import LOCAL_ACCOUNT, TokenStore, ensure_local_token
from .service import gateway_service

PEERS = {
    "sessionlog": ("AGENTHOST_SESSIONLOG_ADDR", "127.0.0.1:7101"),
    "planmode": ("AGENTHOST_PLANMODE_ADDR", "127.0.0.1:7102"),
    "projection": ("AGENTHOST_PROJECTION_ADDR", "127.0.0.1:7103"),
    "workspace": ("AGENTHOST_WORKSPACE_ADDR", "127.0.0.1:7104"),
    "agentruntime": ("AGENTHOST_RUNTIME_ADDR", "127.0.0.1:7105"),
}


def load_tokens(data_dir: Path) -> TokenStore:
    tokens_file = os.environ.get("AGENTHOST_TOKENS_FILE")
    if tokens_file:
        return TokenStore.load(Path(tokens_file))
    path = data_dir / "token"
    token = ensure_local_token(path)
    logging.getLogger("agenthost.gateway").info("local token", extra={"token_file": str(path)})
    return TokenStore({token: LOCAL_ACCOUNT})


async def serve(config: ServiceConfig) -> None:
    addresses = {name: os.environ.get(env, default) for name, (env, default) in PEERS.items()}
    channels = {name: open_channel(a) for name, a in addresses.items() if a != "none"}
    try:
        plan = PlanModeClient(channels["planmode"]) if "planmode" in channels else None
        definition = gateway_service(
            load_tokens(config.data_dir),
            SessionLogClient(channels["sessionlog"]),
            WorkspaceClient(channels["workspace"]),
            runtime_pb2_grpc.AgentRuntimeServiceStub(channels["agentruntime"]),
            projection_pb2_grpc.ProjectionServiceStub(channels["projection"]),
            plan,
        )
        await ServiceHost(config, definition).run_until_signalled()
    finally:
        for channel in channels.values():
            await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="agenthost gateway")
    parser.add_argument("--listen", help="host:port (env AGENTHOST_LISTEN)")
    parser.add_argument("--data-dir", type=Path, help="data folder (env AGENTHOST_DATA_DIR)")
    args = parser.parse_args()
    config = ServiceConfig.from_env("gateway", listen=args.listen, data_dir=args.data_dir)
    configure_logging(config.name, config.log_level)
    asyncio.run(serve(config))


if __name__ == "__main__":
    main()
