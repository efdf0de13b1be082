"""docker-compose.yml comes up healthy from the local image (Debian's
docker-compose 1.29), and a client call through the published port works."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest
from agenthost.sessionlog.v1 import session_log_pb2 as pb
from agenthost.sessionlog.v1 import session_log_pb2_grpc

from tests.containers.stack import REPO, free_loopback_port, open_channel, registry, wait_serving
from tests.support.events import user

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]

UP_TIMEOUT_S = 180
HEALTHY_TIMEOUT_S = 120


class Compose:
    def __init__(self, project: str, image: str) -> None:
        self.project = project
        # Published ports moved to free ones, so a running stack or `make run`
        # on the default ports does not collide with the test.
        self.ports = {
            name: free_loopback_port() for name, entry in registry().items() if "publish" in entry
        }
        self.env = {
            **os.environ,
            "AGENTHOST_IMAGE": image,
            **{f"AGENTHOST_{name.upper()}_PORT": str(port) for name, port in self.ports.items()},
        }

    def run(self, *args: str, timeout: float = UP_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        command = ["docker-compose", "--project-name", self.project, *args]
        return subprocess.run(
            command, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout
        )


@pytest.fixture
def compose(agenthost_image: str, test_session: str) -> Iterator[Compose]:
    if shutil.which("docker-compose") is None:
        pytest.fail("no docker-compose: run .ci/prepare-docker (installs Debian's docker-compose)")
    stack = Compose(f"agenthost-test-{test_session}", agenthost_image)
    try:
        yield stack
    finally:
        stack.run("--profile", "postgres", "down", "--volumes", "--remove-orphans")


async def test_compose_stack_comes_up_healthy_and_answers(compose: Compose) -> None:
    up = await asyncio.to_thread(compose.run, "up", "--detach")
    assert up.returncode == 0, up.stderr
    # Every container healthy by its compose health check (the gRPC health probe).
    healthy = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            str(REPO / "deploy" / "compose_wait.py"),
            "--project",
            compose.project,
            "--timeout",
            str(HEALTHY_TIMEOUT_S),
        ],
        capture_output=True,
        text=True,
        timeout=HEALTHY_TIMEOUT_S + 30,
    )
    if healthy.returncode != 0:
        logs = compose.run("logs", "--no-color", "--tail=50").stdout
        pytest.fail(f"{healthy.stdout}{healthy.stderr}\n{logs[-6000:]}")
    ps = await asyncio.to_thread(compose.run, "ps", "--services", "--filter", "status=running")
    running = ps.stdout.split()
    assert sorted(running) == sorted(registry())

    # The published port (the session log's until the gateway exists) on loopback.
    address = f"127.0.0.1:{compose.ports['sessionlog']}"
    await wait_serving(address)
    async with open_channel(address) as channel:
        log = session_log_pb2_grpc.SessionLogServiceStub(channel)
        await log.CreateSession(pb.CreateSessionRequest(session_id="compose", cwd="/work"))
        events = [user("through compose", event_id="c-1")]
        await log.Append(pb.AppendRequest(session_id="compose", events=events), timeout=10)
        page = await log.TailPage(pb.TailPageRequest(session_id="compose"), timeout=10)
    assert [(e.seq, e.user_message.text) for e in page.events] == [(0, "through compose")]
