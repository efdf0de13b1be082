"""Every service as its own process, wired by AGENTHOST_<PEER>_ADDR variables
as a deployment wires them, and a client's first call through the gateway."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2

from services.common.client import open_channel
from services.common.topology import ADDRESS_ENV, SERVICES
from tests.support.hosts import REPO, ServiceProcess, health_status, wait_for_health

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# Nothing listens on port 1: every call to a peer there fails at once.
UNREACHABLE = "127.0.0.1:1"
# Well within the ~30 s a start-up waits for its peers before it gives up.
STOP_WITHIN_S = 10.0


@pytest.fixture
async def deployment(tmp_path: Path) -> AsyncIterator[dict[str, ServiceProcess]]:
    processes: dict[str, ServiceProcess] = {}
    peers: dict[str, str] = {}
    try:
        for name in SERVICES:  # in start order
            process = ServiceProcess(f"services.{name}", tmp_path / name, env=dict(peers))
            processes[name] = process
            address = await process.start()
            channel = open_channel(address)
            try:
                await wait_for_health(channel, SERVING)
            finally:
                await channel.close()
            peers[ADDRESS_ENV[name]] = address
        yield processes
    finally:
        for process in reversed(processes.values()):
            process.kill()


async def test_a_first_call_through_a_deployment_of_processes(
    deployment: dict[str, ServiceProcess],
) -> None:
    first_call = await asyncio.create_subprocess_exec(
        sys.executable,
        "examples/first_call.py",
        cwd=REPO,
        env={
            **os.environ,
            "AGENTHOST_GATEWAY": deployment["gateway"].address,
            "AGENTHOST_DATA_DIR": str(deployment["gateway"].data_dir),
        },
        stdout=asyncio.subprocess.PIPE,
    )
    output, _ = await asyncio.wait_for(first_call.communicate(), 30)
    assert first_call.returncode == 0
    assert "assistant_message: Echo: Hello, agenthost" in output.decode()
    for process in reversed(deployment.values()):
        process.signal(signal.SIGTERM)
        assert await process.wait() == 0


async def test_a_gateway_whose_peers_are_down_stops_at_once_on_sigterm(tmp_path: Path) -> None:
    """Start-up waits for the peers (health NOT_SERVING meanwhile); SIGTERM
    then ends it cleanly, without waiting for the start-up to give up."""
    down = {ADDRESS_ENV[name]: UNREACHABLE for name in SERVICES if name != "gateway"}
    gateway = ServiceProcess("services.gateway", tmp_path, env=down)
    try:
        channel = open_channel(await gateway.start())
        try:
            assert await health_status(channel) == NOT_SERVING
        finally:
            await channel.close()
        gateway.signal(signal.SIGTERM)
        assert await gateway.wait(within_s=STOP_WITHIN_S) == 0
        assert gateway.process is not None and gateway.process.stderr is not None
        rest = gateway.process.stderr.read().decode()
        assert "Traceback" not in rest and '"level": "error"' not in rest
    finally:
        gateway.kill()


async def test_a_service_on_a_taken_port_exits_1_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        address = f"127.0.0.1:{holder.getsockname()[1]}"
        service = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "services.sessionlog",
            cwd=REPO,
            env={**os.environ, "AGENTHOST_LISTEN": address, "AGENTHOST_DATA_DIR": str(tmp_path)},
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await asyncio.wait_for(service.communicate(), 30)
    assert service.returncode == 1
    lines = stderr.decode().splitlines()
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert (entry["level"], entry["address"]) == ("error", address)
    assert "in use" in entry["msg"]
    assert not (tmp_path / "sessionlog.db").exists()
