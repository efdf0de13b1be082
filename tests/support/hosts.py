"""Real services for tests: in-process hosts on loopback and service processes."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.client import open_channel
from services.common.config import ServiceConfig
from services.common.local import LocalChannel, LocalEndpoints
from services.common.server import ServiceDefinition, ServiceHost, port_in_use

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0


@asynccontextmanager
async def running_host(
    name: str, definition: ServiceDefinition, data_dir: Path, *, local: bool = False
) -> AsyncIterator[tuple[ServiceHost, grpc.aio.Channel]]:
    """A service on 127.0.0.1 with an ephemeral port, and a channel to it:
    over gRPC, or with `local` the in-process one (services/common/local.py)."""
    endpoints = LocalEndpoints()
    config = ServiceConfig(name=name, data_dir=data_dir, grace_s=1.0)
    host = ServiceHost(config, definition, local=endpoints)
    await host.start()
    channel = LocalChannel(endpoints, name) if local else open_channel(host.address)
    try:
        yield host, channel
    finally:
        await channel.close()
        await host.stop()


async def health_status(channel: grpc.aio.Channel, service: str = "") -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    return int(reply.status)


async def wait_for_health(channel: grpc.aio.Channel, wanted: int, service: str = "") -> None:
    """Follow the health Watch stream until it reports `wanted`.

    The call waits for a connection: after a restart on the same port, gRPC may
    still hold the refused connection of the old process in backoff, and a call
    that does not wait would fail on that instead of reaching the new one.
    """
    stub = health_pb2_grpc.HealthStub(channel)

    watch = stub.Watch(health_pb2.HealthCheckRequest(service=service), wait_for_ready=True)

    async def follow() -> None:
        async for reply in watch:
            if reply.status == wanted:
                return

    try:
        await asyncio.wait_for(follow(), START_TIMEOUT_S)
    finally:
        watch.cancel()  # an open watch would hold the service's graceful stop


@dataclass
class ServiceProcess:
    """A service run as `python -m services.<name>`, as `make run` does."""

    module: str
    data_dir: Path
    listen: str = "127.0.0.1:0"
    process: subprocess.Popen[bytes] | None = None
    address: str = ""
    # Extra environment, e.g. the peers' AGENTHOST_<PEER>_ADDR.
    env: dict[str, str] = field(default_factory=dict)
    # The process's last log lines (stderr is drained, so a chatty service
    # never blocks on a full pipe).
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=500))
    _drainer: threading.Thread | None = field(default=None, init=False, repr=False)
    # Notified on every line, for wait_for_line.
    _new_line: threading.Condition = field(
        default_factory=threading.Condition, init=False, repr=False
    )

    async def start(self) -> str:
        env = {
            **os.environ,
            "AGENTHOST_DATA_DIR": str(self.data_dir),
            "AGENTHOST_LISTEN": self.listen,
            "AGENTHOST_GRACE_S": "2",
            **self.env,
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module],
            cwd=REPO,
            env=env,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
        )
        self.address = await asyncio.wait_for(
            asyncio.to_thread(self._read_address), START_TIMEOUT_S
        )
        # Keep the port on restarts so clients can reconnect to the same address.
        self.listen = self.address
        return self.address

    def _read_address(self) -> str:
        assert self.process is not None and self.process.stderr is not None
        for raw in self.process.stderr:
            line = raw.decode(errors="replace").strip()
            self._keep(line)
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("msg") == "listening":
                self._drainer = threading.Thread(
                    target=self._drain, args=(self.process,), daemon=True
                )
                self._drainer.start()
                return str(entry["address"])
        raise RuntimeError(f"{self.module} exited with {self.process.wait()} before listening")

    def _drain(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            self._keep(raw.decode(errors="replace").rstrip())

    def _keep(self, line: str) -> None:
        with self._new_line:
            self.lines.append(line)
            self._new_line.notify_all()

    async def wait_for_line(
        self, matches: Callable[[str], bool], within_s: float = START_TIMEOUT_S
    ) -> str:
        """The first kept line, logged already or to come, that `matches`."""

        def first() -> str | None:
            return next((line for line in self.lines if matches(line)), None)

        def wait() -> str | None:
            with self._new_line:
                return self._new_line.wait_for(first, within_s)

        found = await asyncio.to_thread(wait)
        if found is None:
            raise TimeoutError(f"{self.module} logged no such line within {within_s}s")
        return found

    def signal(self, signum: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    async def wait(self, within_s: float = START_TIMEOUT_S) -> int:
        """The exit code, once the process is gone and `lines` holds all it wrote."""
        assert self.process is not None
        code = await asyncio.wait_for(asyncio.to_thread(self.process.wait), within_s)
        if self._drainer is not None:
            await asyncio.wait_for(asyncio.to_thread(self._drainer.join), within_s)
        return code

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def free_base_port(count: int = 7) -> int:
    """A port with the `count - 1` after it free (by default seven, for `up
    --base-port`: the internal services and the web port), below the
    ephemeral range: the kernel gives ports of that range to outgoing
    connections, which could take one of them before the stack binds it."""
    low, _ = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    for _ in range(200):
        base = random.randrange(10_000, low - count)
        if not any(port_in_use(f"127.0.0.1:{base + offset}") for offset in range(count)):
            return base
    raise RuntimeError(f"no {count} free ports in a row")


def up_with_a_port_taken(port: int, up_args: list[str], data_dir: Path) -> str:
    """`agenthost up <up_args>` while `port` is held: its stderr, after
    checking it exited 1 having made nothing (not even its data folder)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        taken = subprocess.run(
            [sys.executable, "-m", "clients.cli", "up", *up_args],
            cwd=REPO,
            env={**os.environ, "AGENTHOST_DATA_DIR": str(data_dir)},
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
        )
    assert taken.returncode == 1, taken.stderr
    assert not data_dir.exists(), "nothing was started"
    return taken.stderr
