"""Where each service listens by default and how its peers are named."""

from __future__ import annotations

SERVICES = ("sessionlog", "planmode", "projection", "workspace", "agentruntime", "gateway")

DEFAULT_PORTS = {
    "gateway": 7100,
    "sessionlog": 7101,
    "planmode": 7102,
    "projection": 7103,
    "workspace": 7104,
    "agentruntime": 7105,
}

# Where `agenthost up` serves browsers (gRPC-Web, Connect): the port after
# the internal services'.
DEFAULT_WEB_PORT = 7106

# The environment variable naming each service's address for its peers.
ADDRESS_ENV = {
    "sessionlog": "AGENTHOST_SESSIONLOG_ADDR",
    "planmode": "AGENTHOST_PLANMODE_ADDR",
    "projection": "AGENTHOST_PROJECTION_ADDR",
    "workspace": "AGENTHOST_WORKSPACE_ADDR",
    "agentruntime": "AGENTHOST_RUNTIME_ADDR",
    "gateway": "AGENTHOST_GATEWAY_ADDR",
}

# The peers each service calls, so it starts after them (SERVICES order
# respects this; a supervisor may start services that share peers at once).
PEERS: dict[str, tuple[str, ...]] = {
    "sessionlog": (),
    "planmode": ("sessionlog",),
    "projection": ("sessionlog",),
    "workspace": ("sessionlog",),
    "agentruntime": ("sessionlog", "planmode"),
    "gateway": ("sessionlog", "planmode", "projection", "workspace", "agentruntime"),
}

# A peer address of "none" means the deployment runs without that service.
ABSENT = "none"


def default_address(name: str) -> str:
    return f"127.0.0.1:{DEFAULT_PORTS[name]}"
