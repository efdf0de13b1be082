"""Where each service listens by default and how its peers are named."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

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
    "agentruntime": ("sessionlog", "planmode", "workspace"),
    "gateway": ("sessionlog", "planmode", "projection", "workspace", "agentruntime"),
}

# A peer address of "none" means the deployment runs without that service.
ABSENT = "none"


def default_address(name: str) -> str:
    return f"127.0.0.1:{DEFAULT_PORTS[name]}"


# Where peers reach a service that listens on every interface: this host's
# name or address as the others resolve it (a container's or pod's own IP
# when unset), with the port it bound.
ADVERTISE_HOST_ENV = "AGENTHOST_ADVERTISE_HOST"
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "[::]", "::"})


def reachable_address(listen_host: str, port: int, advertise_host: str | None = None) -> str:
    """The address a peer dials to reach a service listening on
    `listen_host`:`port`: the host itself unless it is a wildcard."""
    if listen_host not in WILDCARD_HOSTS:
        return f"{listen_host}:{port}"
    host = advertise_host or socket.gethostbyname(socket.gethostname())
    return f"{host}:{port}"


def target_entries(target: str) -> list[str]:
    """The host:port entries of a gRPC target as peers are configured:
    `host:port`, `ipv4:a:p,b:p` (several replicas, pick_first), `dns:///host:port`."""
    for scheme in ("dns:///", "ipv4:", "ipv6:"):
        if target.startswith(scheme):
            target = target[len(scheme) :]
            break
    return [entry.strip() for entry in target.split(",") if entry.strip()]


async def resolve_replicas(target: str) -> list[str]:
    """Every address the target's names stand for, one per replica: a name
    that resolves to several addresses (a compose service with replicas, a
    headless Kubernetes service) is several replicas. IPv4 first, so that
    `localhost` is one replica, not two."""
    loop = asyncio.get_running_loop()
    found: list[str] = []
    for entry in target_entries(target):
        host, _, port = entry.rpartition(":")
        host = host.strip("[]")
        try:
            ipaddress.ip_address(host)
            found.append(entry)
            continue
        except ValueError:
            pass
        try:
            infos = await loop.getaddrinfo(
                host, port, family=socket.AF_INET, type=socket.SOCK_STREAM
            )
        except socket.gaierror:  # an IPv6-only name
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        found += [_host_port(str(info[4][0]), port) for info in infos]
    return list(dict.fromkeys(found))


def _host_port(ip: str, port: str) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
