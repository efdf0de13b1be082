"""A child forked from an agenthost process always gets to run its program.

With gRPC's fork handlers on, a child forked (as pexpect forks the CLI under
a pty) while a call is under way restarted gRPC's poller and then closed the
descriptors it inherited, the poller's among them: it died with "epoll_wait
error: Bad file descriptor" before exec, about once in fifty forks. Importing
either package turns the handlers off (services/__init__.py says why)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.hosts import REPO

FORKS = 100

# Calls run on the event loop while a thread forks children the way pexpect
# does (a pty, every inherited descriptor closed, then exec).
PROBE = """
import asyncio, sys
import {package}
import grpc, pexpect
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


def spawn_echo():
    child = pexpect.spawn("/bin/echo", ["ran"], encoding="utf-8", timeout=30)
    child.delayafterclose = child.ptyproc.delayafterclose = 0  # no pause after each close
    output = child.read()
    child.close()
    return child.exitstatus == 0 and "ran" in output, output


async def main() -> None:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    died = []
    async with grpc.aio.insecure_channel(f"127.0.0.1:{{port}}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for _ in range({forks}):
            call = asyncio.ensure_future(stub.Check(health_pb2.HealthCheckRequest()))
            ran, output = await asyncio.to_thread(spawn_echo)
            await call
            if not ran:
                died.append(output)
    await server.stop(None)
    print(len(died), died[:1])


asyncio.run(main())
"""


@pytest.mark.parametrize("package", ["services", "clients"])
def test_children_forked_during_grpc_calls_run_their_program(package: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    probe = subprocess.run(
        [sys.executable, "-c", PROBE.format(package=package, forks=FORKS)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.startswith("0 "), probe.stdout
