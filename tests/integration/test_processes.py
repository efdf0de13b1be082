"""Every service as its own process, wired by AGENTHOST_<PEER>_ADDR variables
as a deployment wires them, and a client's first call through the gateway."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2

from services.common.client import open_channel
from services.common.topology import ADDRESS_ENV, SERVICES
from tests.support.hosts import REPO, ServiceProcess, wait_for_health

SERVING = health_pb2.HealthCheckResponse.SERVING


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
