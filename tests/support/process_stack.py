"""Every service as its own `python -m services.<name>` process on fixed
loopback ports, so a test can kill, stop and restart one of them where its
peers and clients expect it (a supervisor, `up --processes`, takes the whole
stack down when a child dies: right for a person, not for fault injection)."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from services.common.internal_auth import TOKEN_ENV, new_token
from services.common.topology import ADDRESS_ENV, SERVICES
from tests.support.hosts import ServiceProcess, free_base_port

# Quiet, but with the "listening" line ServiceProcess waits for.
LOG_LEVEL = "WARNING,agenthost.server=INFO"
STOP_WITHIN_S = 30.0


@dataclass
class ProcessStack:
    data_dir: Path
    processes: dict[str, ServiceProcess]

    @property
    def gateway(self) -> str:
        return self.processes["gateway"].address

    @property
    def token(self) -> str:
        return (self.data_dir / "token").read_text().strip()

    async def start(self) -> None:
        for name in SERVICES:  # peers first
            await self.processes[name].start()

    def kill(self, name: str) -> None:
        self.processes[name].kill()

    async def terminate(self, name: str) -> int:
        """SIGTERM, and the exit code once the process is gone."""
        process = self.processes[name]
        process.signal(signal.SIGTERM)
        return await process.wait(within_s=STOP_WITHIN_S)

    async def restart(self, name: str) -> None:
        """Start a stopped service again on its address."""
        await self.processes[name].start()

    def logs(self) -> str:
        """The services' last log lines, for a failure's message."""
        return "\n".join(
            f"{name}: {line}" for name, process in self.processes.items() for line in process.lines
        )

    def close(self) -> None:
        for name in reversed(SERVICES):
            self.processes[name].kill()


@asynccontextmanager
async def process_stack(
    data_dir: Path, env: Mapping[str, str] | None = None
) -> AsyncIterator[ProcessStack]:
    """The six services as processes sharing `data_dir` and an internal
    token; `env` adds to each one's environment (the model's, say)."""
    base = free_base_port()
    addresses = {name: f"127.0.0.1:{base + n}" for n, name in enumerate(SERVICES)}
    shared = {
        TOKEN_ENV: new_token(),
        "AGENTHOST_LOG_LEVEL": LOG_LEVEL,
        **{ADDRESS_ENV[name]: address for name, address in addresses.items()},
        **(env or {}),
    }
    stack = ProcessStack(
        data_dir,
        {
            name: ServiceProcess(f"services.{name}", data_dir, listen=address, env=dict(shared))
            for name, address in addresses.items()
        },
    )
    try:
        await stack.start()
        yield stack
    finally:
        stack.close()
