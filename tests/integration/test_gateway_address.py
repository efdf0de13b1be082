"""`agenthost up` records its gateway's address beside the token while it
serves, so the CLI, `agenthost acp` and the examples find a stack on any
port with no variable set; an unexpected answer names the address reached
and where that address came from."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pexpect

from tests.integration.test_cli import TIMEOUT_S, Up, chat, running_up
from tests.support.acp import raw_editor
from tests.support.hosts import REPO, free_base_port


def without_gateway(up: Up) -> dict[str, str]:
    """The user's environment with no AGENTHOST_GATEWAY."""
    return {k: v for k, v in up.env.items() if k != "AGENTHOST_GATEWAY"}


def test_the_cli_finds_a_stack_on_free_ports_and_the_file_goes_with_it(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    with running_up(tmp_path, None) as up:
        env = without_gateway(up)
        assert (up.data_dir / "gateway").read_text().strip() == up.gateway
        assert not up.gateway.endswith(":7100")
        listed = up.cli("sessions", "list", env=env)
        assert listed.returncode == 0, listed.stderr
        child = chat(up, "--workspace", str(project), env=env)
        try:
            child.expect_exact(">")
            child.sendline("hello there")
            child.expect_exact("Echo: hello there")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()
        listed = up.cli("sessions", "list", "--json", env=env)
        assert [s["preview"] for s in json.loads(listed.stdout)] == ["Echo: hello there"]
        first_call = subprocess.run(
            [sys.executable, "examples/first_call.py"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert first_call.returncode == 0, first_call.stderr
        assert "Echo: Hello, agenthost" in first_call.stdout
    # A clean stop takes the address away with the stack.
    assert not (up.data_dir / "gateway").exists()


def _sessions_list(up: Up, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return up.cli("sessions", "list", env=env)


def test_an_unexpected_answer_names_the_address_and_where_it_came_from(tmp_path: Path) -> None:
    with running_up(tmp_path, None) as up:
        env = without_gateway(up)
        address_file = up.data_dir / "gateway"
        # Another stack's token.
        refused = _sessions_list(up, {**env, "AGENTHOST_TOKEN": "not-this-stacks-token"})
        assert refused.returncode == 1
        said = " ".join(refused.stderr.split())
        assert f"the gateway at {up.gateway} (from {address_file}, written by" in said
        assert "refused the bearer token from AGENTHOST_TOKEN" in said
        # Named by the variable, nothing listening there.
        nowhere = f"127.0.0.1:{free_base_port()}"
        away = _sessions_list(up, {**env, "AGENTHOST_GATEWAY": nowhere})
        assert away.returncode == 1
        assert f"nothing answers at {nowhere} (from AGENTHOST_GATEWAY)" in " ".join(
            away.stderr.split()
        )
        # A gRPC server that is no agenthost gateway, named by --gateway.
        with other_grpc_server() as other:
            answered = up.cli("sessions", "list", "--gateway", other, env=env)
        assert answered.returncode == 1
        said = " ".join(answered.stderr.split())
        assert f"{other} (from --gateway) answered, but it is not an agenthost gateway" in said
        # Something that does not speak gRPC at all.
        with http_server() as web:
            answered = _sessions_list(up, {**env, "AGENTHOST_GATEWAY": web})
        assert answered.returncode == 1
        assert f"no agenthost gateway answers at {web} (from AGENTHOST_GATEWAY)" in " ".join(
            answered.stderr.split()
        )
        data_dir = up.data_dir
    # The stack was killed without its clean stop: its address file stays
    # behind, and the error says where the dead address came from.
    (data_dir / "gateway").write_text(f"{nowhere}\n")
    stale = _sessions_list(up, without_gateway(up))
    assert stale.returncode == 1
    assert f"nothing answers at {nowhere} (from {data_dir / 'gateway'}, written by" in " ".join(
        stale.stderr.split()
    )


def test_without_an_address_file_the_default_is_named(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTHOST_DATA_DIR": str(tmp_path / "data"), "AGENTHOST_TOKEN": "t"}
    env.pop("AGENTHOST_GATEWAY", None)
    run = subprocess.run(
        [sys.executable, "-m", "clients.cli", "workspace", "list"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    said = " ".join(run.stderr.split())
    assert run.returncode == 1
    assert f"(from the default: there is no {tmp_path / 'data' / 'gateway'})" in said


@contextmanager
def other_grpc_server() -> Iterator[str]:
    """A gRPC server with no services (every call: UNIMPLEMENTED), in a thread."""
    ready = threading.Event()
    stop = threading.Event()
    found: list[str] = []

    async def serve() -> None:
        server = grpc.aio.server()
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        found.append(f"127.0.0.1:{port}")
        ready.set()
        await asyncio.to_thread(stop.wait)
        await server.stop(None)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(TIMEOUT_S)
    try:
        yield found[0]
    finally:
        stop.set()
        thread.join(TIMEOUT_S)


@contextmanager
def http_server() -> Iterator[str]:
    """A plain HTTP/1 server on loopback."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join(TIMEOUT_S)


async def test_an_editor_finds_the_stack_through_the_address_file(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    with running_up(tmp_path, None) as up:
        async with raw_editor(without_gateway(up)) as editor:
            init = await editor.call("initialize", {"protocolVersion": 1})
            assert init["result"]["protocolVersion"] == 1
            created = await editor.call("session/new", {"cwd": str(project), "mcpServers": []})
            session_id = created["result"]["sessionId"]
            prompt = [{"type": "text", "text": "hi editor"}]
            reply = await editor.call("session/prompt", {"sessionId": session_id, "prompt": prompt})
            assert reply["result"]["stopReason"] == "end_turn"
        assert "starting one" not in editor.stderr
        # Another stack's token: said, and no stack started in its place.
        refused = up.cli("acp", env={**without_gateway(up), "AGENTHOST_TOKEN": "wrong"})
        assert refused.returncode == 1
        said = " ".join(refused.stderr.split())
        assert f"the gateway at {up.gateway} (from {up.data_dir / 'gateway'}, written by" in said
        assert "refused the bearer token from AGENTHOST_TOKEN" in said
