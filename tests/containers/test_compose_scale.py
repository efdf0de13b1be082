"""The compose scale profile (deploy/compose.scale.yml) on the local engine:
PostgreSQL, two replicas of every service that can run as replicas, the
gateways behind the haproxy load balancer, every container healthy. Through
the load balancer only, with the Python SDK: a session, a prompt answered by
the built-in model with the turn's end on the stream, plan mode set and read
back, and a client whose gateway is stopped reconnects through the load
balancer to the other one, sees every event exactly once, and its old
generation is refused STALE by both gateways, the restarted one included."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc

from clients.sdk import AgentHostClient
from clients.sdk.session import Session
from tests.containers.stack import REPO, compose_make, free_loopback_port, open_channel, registry
from tests.support.rpc import expect_rpc_error, reason_of

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]

UP_TIMEOUT_S = 240
HEALTHY_TIMEOUT_S = 120
WAIT_S = 60.0
PROJECT_LABEL = "com.docker.compose.project"
# haproxy's line when a check takes a server out (its reason: Layer4 for a
# closed port, Layer7 for an answer that is not SERVING).
LB_SERVER_DOWN = re.compile(r"Server gateways/\S+ is DOWN")
SERVICE_LABEL = "com.docker.compose.service"


class ScaleCompose:
    """`make compose-up COMPOSE_PROFILES=scale` for one project, its own tokens
    file and a free port for the load balancer."""

    def __init__(self, project: str, image: str, tokens_file: Path) -> None:
        self.project = project
        self.port = free_loopback_port()
        self.token = secrets.token_urlsafe(32)
        tokens_file.write_text(json.dumps({self.token: "local"}))
        tokens_file.chmod(0o644)  # the gateways read it as uid 10001
        self.env = {
            **os.environ,
            "AGENTHOST_IMAGE": image,
            "AGENTHOST_GATEWAY_PORT": str(self.port),
            "AGENTHOST_COMPOSE_TOKENS_FILE": str(tokens_file),
        }

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def make(self, target: str) -> subprocess.CompletedProcess[str]:
        return compose_make(
            target,
            self.project,
            self.env,
            UP_TIMEOUT_S,
            HEALTHY_TIMEOUT_S,
            "COMPOSE_PROFILES=scale",
        )

    def run(self, *args: str, timeout: float = UP_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        command = ["docker-compose", "--project-name", self.project]
        command += ["--file", "deploy/compose.scale.yml", *args]
        return subprocess.run(
            command, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def docker(self, *args: str, timeout: float = 60) -> str:
        done = subprocess.run(
            ["docker", *args], capture_output=True, text=True, timeout=timeout, check=True
        )
        return done.stdout

    def containers(self) -> dict[str, list[str]]:
        """The project's running containers by compose service."""
        listed = self.docker(
            "ps",
            "--filter",
            f"label={PROJECT_LABEL}={self.project}",
            "--format",
            f'{{{{.Label "{SERVICE_LABEL}"}}}} {{{{.Names}}}}',
        )
        by_service: dict[str, list[str]] = {}
        for line in listed.splitlines():
            service, name = line.split()
            by_service.setdefault(service, []).append(name)
        return by_service

    def unhealthy(self) -> str:
        """Each container that is not healthy: its state, its health checks'
        last answers and the end of its log (a failed start's evidence)."""
        listed = self.docker(
            "ps",
            "--all",
            "--filter",
            f"label={PROJECT_LABEL}={self.project}",
            "--format",
            "{{.Names}}\t{{.Status}}",
        )
        found = []
        for line in listed.splitlines():
            name, status = line.split("\t", 1)
            if "(healthy)" in status:
                continue
            health = self.docker("inspect", "--format", "{{json .State.Health}}", name)
            logs = subprocess.run(
                ["docker", "logs", "--tail", "40", name], capture_output=True, text=True
            )
            found.append(f"== {name}: {status}\n{health}\n{logs.stdout}{logs.stderr}")
        return "\n".join(found)

    def address_of(self, container: str) -> str:
        return self.docker(
            "inspect",
            "--format",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            container,
        ).strip()

    def running(self, container: str) -> bool:
        return self.docker("inspect", "--format", "{{.State.Running}}", container).strip() == "true"

    def wait_for_line(self, container: str, pattern: re.Pattern[str], timeout: float) -> str:
        """The first line of the container's log from now on that matches."""
        follow = subprocess.Popen(
            ["docker", "logs", "--follow", "--since", "0s", container],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        timer = threading.Timer(timeout, follow.kill)
        timer.start()
        try:
            assert follow.stdout is not None
            for line in follow.stdout:
                if pattern.search(line):
                    return line
            raise AssertionError(f"no line matching {pattern.pattern} in {timeout} s")
        finally:
            timer.cancel()
            follow.kill()
            follow.wait()

    def wait_healthy(self) -> None:
        waited = subprocess.run(
            [
                str(REPO / ".venv" / "bin" / "python"),
                "deploy/compose_wait.py",
                "--project",
                self.project,
                "--timeout",
                str(HEALTHY_TIMEOUT_S),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=HEALTHY_TIMEOUT_S + 30,
        )
        assert waited.returncode == 0, waited.stdout + waited.stderr


@pytest.fixture
def scale(agenthost_image: str, test_session: str, tmp_path: Path) -> Iterator[ScaleCompose]:
    if shutil.which("docker-compose") is None:
        pytest.fail("no docker-compose: run .ci/prepare-docker (installs Debian's docker-compose)")
    stack = ScaleCompose(
        f"agenthost-scale-{test_session}", agenthost_image, tmp_path / "tokens.json"
    )
    try:
        yield stack
    finally:
        stack.run("down", "--volumes", "--remove-orphans")


def prompts(session: Session) -> list[str]:
    """This test's prompts in the log (plan mode adds user messages of its own)."""
    ours = ("before the move", "after the move", "from the past")
    return [e.user_message.text for e in session.events if e.user_message.text in ours]


def turn_over_with(text: str) -> Callable[[Session], bool]:
    return lambda session: not session.running and text in prompts(session)


async def stale_prompt(
    stub: gateway_pb2_grpc.GatewayServiceStub,
    token: str,
    session_id: str,
    generation: int,
    request_id: int,
) -> str:
    fence = gw.RequestFence(client_id="mover", generation=generation, request_id=request_id)
    refused = await expect_rpc_error(
        stub.Prompt(
            gw.PromptRequest(session_id=session_id, text="from the past", fence=fence),
            metadata=(("authorization", f"Bearer {token}"),),
            timeout=10,
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    return reason_of(refused)


async def test_scale_profile_serves_through_the_load_balancer_across_gateway_replicas(
    scale: ScaleCompose,
) -> None:
    up = await asyncio.to_thread(scale.make, "compose-up")
    if up.returncode != 0:
        pytest.fail(f"{up.stdout}{up.stderr}\n{scale.unhealthy()}")
    # Every replica is up (and healthy: compose-up waited for each health check).
    expected = {name: int(entry.get("replicas", 1)) for name, entry in registry().items()}
    expected |= {"postgres": 1, "lb": 1}
    containers = scale.containers()
    assert {service: len(names) for service, names in containers.items()} == expected
    assert expected["gateway"] == 2

    async with AgentHostClient(scale.address, scale.token, client_id="mover") as client:
        # /tmp: a folder every container has (the workspace checks the cwd).
        session = await client.open_session((await client.create_session(cwd="/tmp")).id)
        await session.prompt("before the move")
        await session.wait_until(turn_over_with("before the move"), WAIT_S)
        assert any(
            e.assistant_message.text.startswith("Echo: before the move")
            for e in session.events
            if e.HasField("assistant_message")
        )

        # Plan mode: set through one gateway, read back through both.
        chosen = await session.set_plan(True)
        assert chosen.outcome == "committed", chosen
        for _ in range(2):  # the load balancer takes turns
            answer = await client.plan_mode(session.id)
            assert answer.value.state is not None and answer.value.state.active
        await session.wait_until(lambda s: s.plan.state is not None and s.plan.state.active, WAIT_S)

        # The gateway serving this client's Connect stream, from the load
        # balancer's log (a line per call as the gateway answers it).
        lb_log = scale.docker("logs", containers["lb"][0])
        connects = re.findall(r" (\S+):7100 200 \"POST \S+\.GatewayService/Connect ", lb_log)
        assert connects, lb_log[-2000:]
        (serving,) = [c for c in containers["gateway"] if scale.address_of(c) == connects[-1]]

        old_generation = client.generation
        stopping = asyncio.create_task(asyncio.to_thread(scale.docker, "stop", serving, timeout=60))
        # The load balancer takes the stopping gateway out on its health
        # check (NOT_SERVING while it drains), before its port closes.
        down = await asyncio.to_thread(
            scale.wait_for_line, containers["lb"][0], LB_SERVER_DOWN, WAIT_S
        )
        assert "Layer7" in down and scale.running(serving), down
        await stopping
        await client.wait_for(
            lambda: client.connected and client.generation > old_generation, WAIT_S
        )
        await session.prompt("after the move")
        await session.wait_until(turn_over_with("after the move"), WAIT_S)

        seqs = session.history.seqs
        assert seqs == list(range(session.last_seq + 1)), seqs  # each event once, no gap
        ids = Counter(e.id for e in session.events)
        assert all(count == 1 for count in ids.values()), ids
        assert prompts(session) == ["before the move", "after the move"]

        # The old generation is refused by the gateway left, then by both once
        # the stopped one is back with nothing in memory (the fences are in
        # PostgreSQL).
        async with open_channel(scale.address) as channel:
            stub = gateway_pb2_grpc.GatewayServiceStub(channel)
            refused = await stale_prompt(stub, scale.token, session.id, old_generation, 10**6)
            assert refused == "STALE"
            await asyncio.to_thread(scale.docker, "start", serving)
            await asyncio.to_thread(scale.wait_healthy)
            for n in range(1, 5):  # the load balancer takes turns over both
                refused = await stale_prompt(
                    stub, scale.token, session.id, old_generation, 10**6 + n
                )
                assert refused == "STALE"
        lb_log = scale.docker("logs", containers["lb"][0])
        served = re.findall(r" (\S+):7100 200 \"POST \S+\.GatewayService/Prompt ", lb_log)
        assert scale.address_of(serving) in served[-4:], served
        # Nothing from the past reached the log.
        assert prompts(session) == ["before the move", "after the move"]
