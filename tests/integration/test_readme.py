"""Every command the README shows is run by a test: here when it is quick and
needs no terminal, else by the test named for it (which must exist)."""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hosts import REPO

TIMEOUT_S = 60
README = REPO / "README.md"

# Commands other tests run (the command's pattern -> "module:function").
RUN_ELSEWHERE = {
    r"^make run$": "tests.integration.test_make_run:test_make_run_serves_the_first_call",
    r"^AGENTHOST_BUILTIN_SCRIPT=examples/builtin-demo.json make run$": (
        "tests.integration.test_make_run:test_the_demo_script_plays_through_make_run_and_chat"
    ),
    r"^make test$": "the CI itself (.ci/run)",
    r"^\.venv/bin/python examples/first_call\.py$": (
        "tests.integration.test_make_run:test_make_run_serves_the_first_call"
    ),
    r"^agenthost chat$": (
        "tests.integration.test_cli:test_the_cli_works_from_any_folder_and_chats_in_its_workspace"
    ),
    r"^agenthost chat --(continue|resume)$": (
        "tests.integration.test_cli:test_sessions_are_found_managed_and_resumed"
    ),
    # make test runs it through tools/need-docker when no engine answers.
    r"^\.ci/prepare-docker$": (
        "tests.integration.test_prerequisites:test_with_an_engine_it_does_nothing"
    ),
    r"^make compose-(up|down)$": (
        "tests.containers.test_compose:test_compose_stack_comes_up_healthy_and_answers"
    ),
    r"^export AGENTHOST_TOKEN=\$\(docker-compose": (
        "tests.containers.test_compose:test_compose_stack_comes_up_healthy_and_answers"
    ),
}
# Run here, in order, against a stack started by the test (see below).
RUN_HERE = [
    r"^export AGENTHOST_MODEL",  # only sets the environment
    r"^make install$",
    r"^cd ",
    r"^agenthost exec ",
    r"^echo .* \| agenthost exec ",
    r"^agenthost workspace add \.$",
    r"^agenthost sessions ",
    r"^agenthost plan get SESSION_ID$",
]


SHELL_FENCES = {"```sh", "```bash", "```shell", "```console"}


def readme_commands() -> list[str]:
    """The command lines of the README's shell blocks, comments cut off."""
    commands, inside = [], False
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            inside = line.strip() in SHELL_FENCES
            continue
        if inside and line.strip():
            commands.append(re.sub(r"\s+#.*$", "", line).strip())
    return commands


def test_every_readme_command_is_run_by_a_test() -> None:
    for command in readme_commands():
        here = any(re.search(p, command) for p in RUN_HERE)
        elsewhere = [t for p, t in RUN_ELSEWHERE.items() if re.search(p, command)]
        assert here or elsewhere, f"no test runs the README's {command!r}"
        for target in elsewhere:
            if ":" in target:
                module, name = target.split(":")
                assert hasattr(importlib.import_module(module), name), target


@pytest.fixture
def home(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A user's environment (HOME, state folder) and `agenthost up` running in it."""
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_STATE_HOME": ""}
    for name in ("AGENTHOST_TOKEN", "AGENTHOST_DATA_DIR", "AGENTHOST_BUILTIN_SCRIPT"):
        env.pop(name, None)
    env.pop("AGENTHOST_GATEWAY", None)
    Path(env["HOME"]).mkdir()
    up = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "up", "--free-ports"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    gateway: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert up.stdout is not None
        for line in up.stdout:
            if line.startswith('{"agenthost": "up"'):
                gateway.append(json.loads(line)["addresses"]["gateway"])
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        ready.wait(TIMEOUT_S)
        assert gateway, "agenthost up did not come up"
        # No AGENTHOST_GATEWAY: the commands find `up` (on free ports) as a
        # user's would, through the address it records in its data folder.
        yield env
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(TIMEOUT_S)


def test_the_readme_commands_run_as_written(home: dict[str, str], tmp_path: Path) -> None:
    env = dict(home)
    env["PATH"] = f"{env['HOME']}/.local/bin:{env['PATH']}"
    cwd = REPO
    session_id = ""
    for command in readme_commands():
        if not any(re.search(p, command) for p in RUN_HERE):
            continue
        if command.startswith("export "):
            continue
        if command.startswith("cd "):
            cwd = Path(command.removeprefix("cd ").replace("~", env["HOME"]))
            cwd.mkdir(parents=True, exist_ok=True)
            continue
        shown = command.replace("SESSION_ID", session_id or "SESSION_ID")
        run = subprocess.run(
            ["bash", "-c", shown],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert run.returncode == 0, f"{shown!r}: {run.stderr}"
        if command == "agenthost workspace add .":
            session_id = _a_session(env, cwd)
    assert session_id and (cwd / "session.jsonl").exists()


def _a_session(env: dict[str, str], cwd: Path) -> str:
    """Make a session with one exchange in the workspace of `cwd` (the
    README's SESSION_ID stands for one), through the SDK."""
    script = f"""
import asyncio
from clients.cli.config import default_data_dir, find_gateway
from clients.sdk import AgentHostClient
async def main():
    token = (default_data_dir() / "token").read_text().strip()
    async with AgentHostClient(find_gateway(None, default_data_dir()).address, token) as client:
        workspace = await client.create_workspace({str(cwd)!r})
        connected = await client.connect_workspace(workspace.id)
        session = await client.open_session(connected.session.id)
        await session.prompt("hello")
        await session.wait_until(lambda s: not s.running and len(s.events) > 3, 30)
        print(session.id)
asyncio.run(main())
"""
    made = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert made.returncode == 0, made.stderr
    return shlex.split(made.stdout)[-1]
