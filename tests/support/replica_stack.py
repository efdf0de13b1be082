"""Every service as one or more `python -m services.<name>` processes (its
replicas) on fixed loopback ports over one database, as a scaled deployment
runs them: a peer reaches a service through one gRPC target naming all its
replicas (`ipv4:a,b`: a pick_first channel that moves on to the next replica
when the one it uses goes away), as clients reach the gateways behind a load
balancer. A test can kill and restart any one replica where the others
expect it.

The database is the environment's (AGENTHOST_DATABASE_URL and
AGENTHOST_DATABASE_SCHEMA, see tests/support/postgres.py stack_on_postgres):
replicas share state only through it."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from services.common.internal_auth import TOKEN_ENV, new_token
from services.common.topology import ADDRESS_ENV, SERVICES
from tests.support.hosts import ServiceProcess, free_base_port
from tests.support.process_stack import LOG_LEVEL

# The bearer token clients use, for the account "local".
CLIENT_TOKEN_FILE = "tokens.json"


def target(addresses: Sequence[str]) -> str:
    """The gRPC target of a service with these replicas: one address as it
    is, several as one pick_first channel over all of them."""
    if len(addresses) == 1:
        return addresses[0]
    return "ipv4:" + ",".join(addresses)


@dataclass
class ReplicaStack:
    data_dir: Path
    token: str  # the clients' bearer token
    replicas: dict[str, list[ServiceProcess]]

    def addresses(self, name: str) -> list[str]:
        return [replica.address for replica in self.replicas[name]]

    def target(self, name: str) -> str:
        """Where a client or peer reaches `name` (all its replicas)."""
        return target(self.addresses(name))

    @property
    def gateway(self) -> str:
        return self.target("gateway")

    @property
    def internal_token(self) -> str:
        return self.replicas["sessionlog"][0].env[TOKEN_ENV]

    def kill(self, name: str, index: int) -> None:
        """SIGKILL one replica (no clean-up: its calls and connections just end)."""
        replica = self.replicas[name][index]
        assert replica.process is not None
        exited = replica.process.poll()
        assert exited is None, f"{name}[{index}] exited {exited} before the kill:\n" + "\n".join(
            replica.lines
        )
        replica.signal(signal.SIGKILL)
        replica.process.wait()

    async def restart(self, name: str, index: int) -> None:
        """Start a stopped replica again on its address."""
        await self.replicas[name][index].start()

    def exited(self) -> list[str]:
        """The replicas whose process has ended (killed ones not started again included)."""
        return [
            f"{name}[{n}] ({replica.process.poll() if replica.process else 'never started'})"
            for name, replicas in self.replicas.items()
            for n, replica in enumerate(replicas)
            if replica.process is None or replica.process.poll() is not None
        ]

    def logs(self) -> str:
        """The replicas' last log lines, for a failure's message."""
        return "\n".join(
            f"{name}[{n}]: {line}"
            for name, replicas in self.replicas.items()
            for n, replica in enumerate(replicas)
            for line in replica.lines
        )

    def close(self) -> None:
        for name in reversed(SERVICES):
            for replica in self.replicas[name]:
                replica.kill()


def _client_token(data_dir: Path) -> tuple[str, Path]:
    """A new client token for the account "local", and the file the gateways read it from."""
    data_dir.mkdir(parents=True, exist_ok=True)
    token = new_token()
    tokens = data_dir / CLIENT_TOKEN_FILE
    tokens.write_text(json.dumps({token: "local"}))
    return token, tokens


@asynccontextmanager
async def replica_stack(
    data_dir: Path, replicas: Mapping[str, int], env: Mapping[str, str] | None = None
) -> AsyncIterator[ReplicaStack]:
    """`replicas[name]` processes of each service (one where it is not
    named), each with a data folder of its own, sharing an internal token
    and the database the environment names; the gateways share one client
    token file. `env` adds to each one's environment (the model's, say)."""
    counts = {name: replicas.get(name, 1) for name in SERVICES}
    assert all(count >= 1 for count in counts.values()), counts
    base = free_base_port(sum(counts.values()))
    ports = iter(range(base, base + sum(counts.values())))
    addresses = {
        name: [f"127.0.0.1:{next(ports)}" for _ in range(count)] for name, count in counts.items()
    }
    token, tokens = _client_token(data_dir)
    shared = {
        TOKEN_ENV: new_token(),
        "AGENTHOST_LOG_LEVEL": LOG_LEVEL,
        "AGENTHOST_TOKENS_FILE": str(tokens),
        **{ADDRESS_ENV[name]: target(listen) for name, listen in addresses.items()},
        **(env or {}),
    }
    stack = ReplicaStack(
        data_dir,
        token,
        {
            name: [
                ServiceProcess(
                    f"services.{name}", data_dir / f"{name}-{n}", listen=address, env=dict(shared)
                )
                for n, address in enumerate(listen)
            ]
            for name, listen in addresses.items()
        },
    )
    try:
        for name in SERVICES:  # peers first; a service's replicas at once
            await asyncio.gather(*(replica.start() for replica in stack.replicas[name]))
        yield stack
    finally:
        stack.close()
