"""agenthost services in containers, for the container suite.

Each service runs from the one image in its own container on a user-defined
network, reachable there as `<name>:7100` and from the host on a port
published on 127.0.0.1. Readiness is the gRPC health service, watched from
the host with a timeout.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network
from testcontainers.core.wait_strategies import HealthcheckWaitStrategy

from services.common.topology import ADDRESS_ENV

REPO = Path(__file__).resolve().parents[2]
PORT = 7100  # every service's port in its container
LABEL = "agenthost.test-session"
START_TIMEOUT_S = 60.0
SERVING = health_pb2.HealthCheckResponse.SERVING

# Reconnect quickly while a container starts or restarts (the defaults back
# off to minutes); the published port accepts TCP before the service listens.
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def registry() -> dict[str, dict[str, Any]]:
    """deploy/services.toml: the services compose and Kubernetes run, in start order."""
    services = tomllib.loads((REPO / "deploy" / "services.toml").read_text())["services"]
    return cast(dict[str, dict[str, Any]], services)


def peer_addresses() -> dict[str, str]:
    """Where each service finds the others on the network (as compose and Kubernetes set it)."""
    return {ADDRESS_ENV[name]: f"{name}:{PORT}" for name in registry()}


def compose_make(
    target: str, project: str, env: Mapping[str, str], up_s: float, healthy_s: float, *settings: str
) -> subprocess.CompletedProcess[str]:
    """The README's `make compose-up` / `make compose-down` for one compose
    project (`settings`: more make variables, e.g. a profile)."""
    return subprocess.run(
        [
            "make",
            "--no-print-directory",
            target,
            *settings,
            f"COMPOSE_PROJECT={project}",
            f"AGENTHOST_IMAGE={env['AGENTHOST_IMAGE']}",
            f"COMPOSE_WAIT_S={healthy_s}",
        ],
        cwd=REPO,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=up_s + healthy_s,
    )


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def open_channel(address: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)


class ServiceContainer(DockerContainer):
    """`docker run IMAGE <service>` on `network` as `<service>`, 7100 on 127.0.0.1:<port>.

    The host port is chosen up front so it stays the same across a restart.
    """

    def __init__(
        self,
        image: str,
        service: str,
        network: Network,
        session: str,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(image)
        self.service = service
        self.host_port = free_loopback_port()
        self.with_command(service)
        self.with_network(network)
        self.with_network_aliases(service)
        self.with_envs(AGENTHOST_GRACE_S="2", **peer_addresses(), **(env or {}))
        self.with_kwargs(labels={LABEL: session})
        # testcontainers types host ports as int; docker accepts (ip, port),
        # which keeps the port off every interface but loopback.
        cast(dict[str, object], self.ports)[f"{PORT}/tcp"] = ("127.0.0.1", self.host_port)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.host_port}"

    def logs(self) -> str:
        stdout, stderr = self.get_logs()
        return (stdout + stderr).decode(errors="replace")


async def wait_serving(address: str, timeout_s: float = START_TIMEOUT_S) -> None:
    """Follow the gRPC health Watch stream until the server reports SERVING.

    A stream cut by the server going away (a restart) is followed again: with
    wait_for_ready the new one waits until the channel reconnects."""
    async with open_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        async with asyncio.timeout(timeout_s):
            while True:
                try:
                    request = health_pb2.HealthCheckRequest()
                    async for reply in stub.Watch(request, wait_for_ready=True):
                        if reply.status == SERVING:
                            return
                except grpc.aio.AioRpcError as error:
                    if error.code() != grpc.StatusCode.UNAVAILABLE:
                        raise


POSTGRES_PASSWORD = "agenthost"
POSTGRES_DSN = f"postgresql://agenthost:{POSTGRES_PASSWORD}@postgres:5432/agenthost"


class PostgresContainer(DockerContainer):
    """PostgreSQL on `network` as `postgres` (the image `make postgres-image` picked),
    ready once its Docker health check (pg_isready) reports healthy."""

    def __init__(self, image: str, network: Network, session: str) -> None:
        super().__init__(image)
        self.with_network(network)
        self.with_network_aliases("postgres")
        self.with_envs(
            POSTGRES_USER="agenthost", POSTGRES_DB="agenthost", POSTGRES_PASSWORD=POSTGRES_PASSWORD
        )
        second = 1_000_000_000  # Docker counts health check times in nanoseconds
        self.with_kwargs(
            labels={LABEL: session},
            healthcheck={
                "test": ["CMD", "pg_isready", "--username=agenthost", "--dbname=agenthost"],
                "interval": second // 2,
                "timeout": 5 * second,
                "retries": 120,
            },
        )
        self.waiting_for(HealthcheckWaitStrategy().with_startup_timeout(int(START_TIMEOUT_S)))
