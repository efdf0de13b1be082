"""The embedded default: every service in one process on loopback, SQLite
under one data folder. `agenthost up` (and so `make run`) starts this."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from services.common.config import ServiceConfig
from services.common.server import ServiceDefinition, ServiceHost
from services.sessionlog.service import session_log_service

DEFAULT_HOST = "127.0.0.1"

# name -> (default port, definition built from the data folder)
ServiceFactory = Callable[[Path], ServiceDefinition]
SERVICES: dict[str, tuple[int, ServiceFactory]] = {
    "sessionlog": (7101, lambda data: session_log_service(data / "sessionlog.db")),
}


@dataclass
class EmbeddedStack:
    data_dir: Path
    host: str = DEFAULT_HOST
    # 0 picks a free port for every service (tests); None uses the defaults.
    port_override: int | None = None
    hosts: dict[str, ServiceHost] = field(default_factory=dict)

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for name, (port, factory) in SERVICES.items():
            listen_port = port if self.port_override is None else self.port_override
            config = ServiceConfig(
                name=name, listen=f"{self.host}:{listen_port}", data_dir=self.data_dir, grace_s=2.0
            )
            service_host = ServiceHost(config, factory(self.data_dir))
            await service_host.start()
            self.hosts[name] = service_host

    async def stop(self) -> None:
        for service_host in reversed(list(self.hosts.values())):
            await service_host.stop()

    def addresses(self) -> dict[str, str]:
        return {name: h.address for name, h in self.hosts.items()}

    async def run_until_signalled(self) -> None:
        import signal

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        await self.stop()
