"""docker-compose.yml comes up healthy from the local image (Debian's
docker-compose 1.29), and the README's first call works through the one
published port, the gateway's: a session, a prompt answered by the built-in
model through the agent runtime, the turn's end on the live stream, history."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc

from tests.containers.stack import (
    REPO,
    compose_make,
    free_loopback_port,
    open_channel,
    registry,
    wait_serving,
)

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]

UP_TIMEOUT_S = 180
HEALTHY_TIMEOUT_S = 120
CALL_TIMEOUT_S = 60


# A read of the session log from inside the network, with no internal token.
UNTOKENED_READ = """
import grpc
from agenthost.sessionlog.v1 import session_log_pb2 as pb, session_log_pb2_grpc as pb_grpc
channel = grpc.insecure_channel("sessionlog:7100")
try:
    pb_grpc.SessionLogServiceStub(channel).ListSessions(pb.ListSessionsRequest(), timeout=10)
    print("ANSWERED")
except grpc.RpcError as error:
    print(error.code().name)
"""


# Inside the agent runtime's container: whether commands can be confined
# there, and what a confined command trying to escape gets.
CONFINED_ESCAPE = """
import asyncio, pathlib
from services.agentruntime.confinement import Jail, describe
from services.agentruntime.shell import run_shell
print(describe())
workspace = pathlib.Path("/tmp/escape-test")
workspace.mkdir(exist_ok=True)
jail = Jail("workspace-write", workspace, hidden=(pathlib.Path("/data"),))
command = "touch made /data/planted /etc/planted; ls /data; cat /proc/1/environ; echo end"
print(asyncio.run(run_shell(command, workspace, timeout_s=30, jail=jail)).output)
# A fork bomb (a non-root runtime: RLIMIT_NPROC in the sandbox's user namespace).
bomb = "bomb() { bomb & bomb & wait; }; bomb"
limited = Jail("workspace-write", workspace, max_processes=32)
ended = asyncio.run(run_shell(bomb, workspace, timeout_s=3, jail=limited))
print("bomb timed out:", ended.timed_out, "limited:", "Resource temporarily" in ended.output)
"""


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

    def make(self, target: str) -> subprocess.CompletedProcess[str]:
        """The README's `make compose-up` / `make compose-down`, for this project."""
        return compose_make(target, self.project, self.env, UP_TIMEOUT_S, HEALTHY_TIMEOUT_S)

    def volumes(self) -> list[str]:
        listed = subprocess.run(
            [
                "docker",
                "volume",
                "ls",
                "--quiet",
                "--filter",
                f"label=com.docker.compose.project={self.project}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return listed.stdout.split()

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


async def first_call(address: str, token: str) -> gw.OpenSessionResponse:
    auth = (("authorization", f"Bearer {token}"),)
    async with open_channel(address) as channel:
        gateway = gateway_pb2_grpc.GatewayServiceStub(channel)
        # The cwd must be a folder the workspace container has (/tmp: every one).
        created = await gateway.CreateSession(
            gw.CreateSessionRequest(cwd="/tmp"), metadata=auth, timeout=10
        )
        session_id = created.session.id
        stream = gateway.Connect(gw.ConnectRequest(client_id="compose-test"), metadata=auth)
        try:
            assert (await stream.read()).HasField("connected")
            fence = gw.RequestFence(client_id="compose-test", generation=0, request_id=1)
            await gateway.Prompt(
                gw.PromptRequest(session_id=session_id, text="Hello, compose", fence=fence),
                metadata=auth,
                timeout=10,
            )
            while True:  # the live stream until the turn is over
                frame = await stream.read()
                ours = frame.HasField("session_status") and (
                    frame.session_status.session_id == session_id
                )
                if ours and not frame.session_status.running:
                    break
        finally:
            stream.cancel()
        opened: gw.OpenSessionResponse = await gateway.OpenSession(
            gw.OpenSessionRequest(session_id=session_id), metadata=auth, timeout=10
        )
        return opened


async def test_compose_stack_comes_up_healthy_and_answers(compose: Compose) -> None:
    # `make compose-up` waits until every container is healthy by its compose
    # health check (the gRPC health probe).
    up = await asyncio.to_thread(compose.make, "compose-up")
    if up.returncode != 0:
        logs = compose.run("logs", "--no-color", "--tail=50").stdout
        pytest.fail(f"{up.stdout}{up.stderr}\n{logs[-6000:]}")
    ps = await asyncio.to_thread(compose.run, "ps", "--services", "--filter", "status=running")
    assert sorted(ps.stdout.split()) == sorted(registry())

    # Only the gateway is published; its token is the one it made in its volume.
    assert list(compose.ports) == ["gateway"]
    address = f"127.0.0.1:{compose.ports['gateway']}"
    await wait_serving(address)
    token = await asyncio.to_thread(compose.run, "exec", "-T", "gateway", "cat", "/data/token")
    assert token.returncode == 0, token.stderr
    async with asyncio.timeout(CALL_TIMEOUT_S):
        opened = await first_call(address, token.stdout.strip())
    texts = [e.user_message.text or e.assistant_message.text for e in opened.events]
    assert "Hello, compose" in texts
    assert any(text.startswith("Echo: Hello, compose") for text in texts), texts
    assert [e.seq for e in opened.events] == list(range(len(opened.events)))

    # A container on the stack's network reaches the session log's port, but
    # without the stack's internal token it reads nothing.
    outsider = await asyncio.to_thread(
        compose.run, "exec", "-T", "gateway", "python", "-c", UNTOKENED_READ
    )
    assert outsider.stdout.strip() == "UNAUTHENTICATED", outsider.stdout + outsider.stderr

    # The agent runtime's container confines commands (its seccomp profile
    # allows bubblewrap's user namespaces): the data folder is hidden and
    # read-only, /etc read-only, the runtime's environment (its token) closed.
    escape = await asyncio.to_thread(
        compose.run, "exec", "-T", "agentruntime", "python", "-c", CONFINED_ESCAPE
    )
    shown = escape.stdout + escape.stderr
    assert "commands: confined by bubblewrap" in shown, shown
    assert "/data/planted': Read-only file system" in shown, shown
    assert "/etc/planted': Read-only file system" in shown, shown
    assert "AGENTHOST_INTERNAL_TOKEN" not in shown and "end" in shown, shown
    assert "bomb timed out: True limited: True" in shown, shown
    planted = await asyncio.to_thread(
        compose.run, "exec", "-T", "agentruntime", "ls", "/data", "/tmp/escape-test"
    )
    assert "planted" not in planted.stdout and "made" in planted.stdout, planted.stdout

    # `make compose-down` deletes the data too, as the README warns.
    assert compose.volumes(), "the stack keeps its data in named volumes"
    down = await asyncio.to_thread(compose.make, "compose-down")
    assert down.returncode == 0, down.stderr
    assert compose.volumes() == []
