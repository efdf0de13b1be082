"""The `python -m services.<name>` entry point every service shares."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc

from .client import open_channel
from .config import ServiceConfig
from .heap import hold_collections
from .logs import configure_logging
from .server import PortInUse, ServiceDefinition, ServiceHost
from .topology import ABSENT, ADDRESS_ENV, default_address

log = logging.getLogger("agenthost.server")

# Set by a supervisor (services/supervisor.py) to its pid: the service stops
# when that process is gone, even when it was killed too hard to stop it.
SUPERVISOR_ENV = "AGENTHOST_SUPERVISOR_PID"
PR_SET_PDEATHSIG = 1  # linux/prctl.h

# Channels to the peers by name; None for an optional peer set to "none".
Peers = dict[str, grpc.aio.Channel | None]
Build = Callable[[ServiceConfig, Peers], ServiceDefinition]


def run_service(name: str, build: Build, peers: Sequence[str] = ()) -> None:
    """Parse the command line and environment, then serve until SIGTERM.

    Each peer's address comes from `--<peer>`, its AGENTHOST_<PEER>_ADDR
    variable, or the embedded default port on loopback."""
    hold_collections()  # until it serves (heap.py)
    _stop_with_supervisor()
    parser = argparse.ArgumentParser(description=f"agenthost {name} service")
    parser.add_argument("--listen", help="host:port (env AGENTHOST_LISTEN)")
    parser.add_argument("--data-dir", type=Path, help="data folder (env AGENTHOST_DATA_DIR)")
    for peer in peers:
        parser.add_argument(
            f"--{peer}",
            help=f"{peer} host:port, or {ABSENT!r} (env {ADDRESS_ENV[peer]})",
            default=os.environ.get(ADDRESS_ENV[peer], default_address(peer)),
        )
    args = parser.parse_args()
    addresses = {peer: getattr(args, peer) for peer in peers}
    config = ServiceConfig.from_env(
        name, listen=args.listen, data_dir=args.data_dir, peer_addresses=addresses
    )
    configure_logging(config.name, config.log_level)
    try:
        asyncio.run(_serve(config, addresses, build))
    except PortInUse as error:
        log.error("cannot listen: %s", error.strerror, extra={"address": error.address})
        raise SystemExit(1) from None
    except Exception:
        # One JSON line (the traceback inside it), not a bare traceback.
        log.exception("the service failed")
        raise SystemExit(1) from None


def _stop_with_supervisor() -> None:
    """Have the kernel send SIGTERM when the supervisor dies (Linux); a
    supervisor that died before this ran is noticed by the pid check."""
    supervisor = os.environ.get(SUPERVISOR_ENV)
    if not supervisor:
        return
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(supervisor):
        raise SystemExit(0)


async def _serve(config: ServiceConfig, addresses: dict[str, str], build: Build) -> None:
    # Channels are made inside the loop: grpc.aio binds them to it.
    channels: Peers = {
        peer: None if address == ABSENT else open_channel(address, config.internal_token)
        for peer, address in addresses.items()
    }
    try:
        await ServiceHost(config, build(config, channels)).run_until_signalled()
    finally:
        for channel in channels.values():
            if channel is not None:
                await channel.close()


def required(channels: Peers, peer: str) -> grpc.aio.Channel:
    channel = channels[peer]
    if channel is None:
        raise SystemExit(f"this service cannot run without {peer}")
    return channel
