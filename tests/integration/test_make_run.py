"""`agenthost up` (what `make run` starts) and the README's first call."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pexpect

from tests.support.hosts import REPO, free_base_port, up_with_a_port_taken

TIMEOUT_S = 30


def _read_up_line(process: subprocess.Popen[str]) -> dict[str, Any]:
    return _read_up(process)[0]


def _read_up(process: subprocess.Popen[str]) -> tuple[dict[str, Any], list[str]]:
    """The up line, and the lines printed before it."""
    assert process.stdout is not None
    printed: list[str] = []
    for line in process.stdout:
        if line.startswith('{"agenthost": "up"'):
            return dict(json.loads(line)), printed
        printed.append(line.rstrip("\n"))
    raise RuntimeError(f"agenthost up exited with {process.wait()}")


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as reply:  # loopback only
        return str(reply.read().decode())


async def test_make_run_serves_the_first_call(tmp_path: Path) -> None:
    """`make run` (on free ports, with its data in a temporary folder), then
    the README's first call."""
    up = subprocess.Popen(
        ["make", "--no-print-directory", "run", "UP_FLAGS=--free-ports"],
        cwd=REPO,
        env={**os.environ, "AGENTHOST_DATA_DIR": str(tmp_path / "data")},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        up_line, before = await asyncio.wait_for(asyncio.to_thread(_read_up, up), TIMEOUT_S)
        # Whether the agent's commands are confined here, probed once at start.
        assert "commands: confined by bubblewrap (/usr/bin/bwrap)" in before, before
        addresses = up_line["addresses"]
        # make run built the web client; the printed page is it, with the token.
        token = (tmp_path / "data" / "token").read_text().strip()
        assert up_line["page"] == f"{up_line['web']}/#token={token}"
        assert '<div id="root">' in await asyncio.to_thread(_fetch, up_line["page"])
        first_call = await asyncio.create_subprocess_exec(
            sys.executable,
            "examples/first_call.py",
            cwd=REPO,
            env={
                **os.environ,
                "AGENTHOST_GATEWAY": addresses["gateway"],
                "AGENTHOST_DATA_DIR": str(tmp_path / "data"),
            },
            stdout=asyncio.subprocess.PIPE,
        )
        output, _ = await asyncio.wait_for(first_call.communicate(), TIMEOUT_S)
        assert first_call.returncode == 0
        printed = output.decode()
        assert "user_message: Hello, agenthost" in printed
        assert "assistant_message: Echo: Hello, agenthost" in printed
        assert (tmp_path / "data" / "sessionlog.db").exists()
        os.killpg(up.pid, signal.SIGINT)  # Ctrl-C reaches make and the stack
        # make reports the interrupt (its child, `agenthost up`, stops cleanly).
        code = await asyncio.wait_for(asyncio.to_thread(up.wait), TIMEOUT_S)
        assert code in (0, 2, 130, -signal.SIGINT)
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()


def test_the_demo_script_plays_through_make_run_and_chat(tmp_path: Path) -> None:
    """The README's demo: `AGENTHOST_BUILTIN_SCRIPT=examples/builtin-demo.json
    make run`, then `agenthost chat` in a project folder, played to the end."""
    data, project = tmp_path / "data", tmp_path / "project"
    project.mkdir()
    env = {
        **os.environ,
        "AGENTHOST_DATA_DIR": str(data),
        "AGENTHOST_BUILTIN_SCRIPT": "examples/builtin-demo.json",
        "NO_COLOR": "1",
        "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",
    }
    up = subprocess.Popen(
        ["make", "--no-print-directory", "run", "UP_FLAGS=--free-ports"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        addresses = _read_up_line(up)["addresses"]
        child = pexpect.spawn(
            str(REPO / ".venv" / "bin" / "agenthost"),
            ["chat"],
            cwd=str(project),
            env={**env, "AGENTHOST_GATEWAY": addresses["gateway"]},
            encoding="utf-8",
            timeout=TIMEOUT_S,
            dimensions=(60, 200),
        )
        try:
            child.expect_exact(">")
            child.sendline("show me what you can do")
            child.expect_exact("I'll read what is here")
            child.expect_exact("Allow write NOTES.md?")
            child.sendline("y")
            child.expect_exact("Allow $ wc -l NOTES.md && echo looks good?")
            child.sendline("y")
            child.expect_exact("looks good")
            child.expect_exact("Type /plan and send another message")
            child.sendline("/plan")
            child.expect_exact("plan: on")
            child.sendline("plan something")
            child.expect_exact("Read the code.")
            child.expect_exact("choice>")
            child.sendline("a")
            child.expect_exact("The plan is approved")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()
        assert (project / "NOTES.md").read_text().startswith("# Notes")
    finally:
        os.killpg(up.pid, signal.SIGINT)
        try:
            up.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()


def test_make_run_twice_the_second_says_in_one_line_that_the_port_is_taken(
    tmp_path: Path,
) -> None:
    """Two stacks must not share ports (SO_REUSEPORT would let them) nor one
    data folder: the second `agenthost up` exits 1 with one line."""
    base = free_base_port()
    command = [sys.executable, "-m", "clients.cli", "up", "--base-port", str(base)]
    env = {**os.environ, "AGENTHOST_DATA_DIR": str(tmp_path / "data")}
    first = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        addresses = _read_up_line(first)["addresses"]
        assert addresses["gateway"] == f"127.0.0.1:{base}"
        second = subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
        assert second.returncode == 1
        assert second.stderr.splitlines() == [
            f"port {base} is in use; is agenthost already running? use --free-ports"
        ]
        assert "agenthost is up" not in second.stdout
        # The first stack still serves and stops cleanly.
        first.send_signal(signal.SIGINT)
        assert first.wait(TIMEOUT_S) == 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def test_up_on_a_port_another_program_holds_says_so_in_one_line(tmp_path: Path) -> None:
    port = free_base_port()  # the gateway's
    stderr = up_with_a_port_taken(port, ["--base-port", str(port)], tmp_path / "data")
    assert stderr.splitlines() == [
        f"port {port} is in use; is agenthost already running? use --free-ports"
    ]
