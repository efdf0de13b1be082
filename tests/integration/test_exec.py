"""`agenthost exec` as a script uses it: against a running `agenthost up`
(found through its address file, no variable set) and with no stack at all
(it starts one in its own process on the data folder, and stops it after),
in text and in --json, its prompt from the command line or stdin, with each
exit code it can produce (an interrupted turn: its runtime killed, in a stack
of one process per service). The model is the built-in one, scripted."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_cli import TIMEOUT_S, Up, plan_call, running_up
from tests.support.hosts import free_base_port
from tests.support.process_stack import process_stack


def exec_(
    env: Mapping[str, str], *args: str, cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clients.cli", "exec", *args],
        cwd=cwd,
        env=dict(env),
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def events(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["type"] == "event"]


def said(run: subprocess.CompletedProcess[str]) -> str:
    """stderr, its wrapping undone."""
    return " ".join(run.stderr.split())


def user_env(up: Up) -> dict[str, str]:
    """As a user's shell has it: no AGENTHOST_GATEWAY, exec finds `up` itself."""
    return {k: v for k, v in up.env.items() if k != "AGENTHOST_GATEWAY"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "app.py").write_text("def answer():\n    return 1\n")
    return folder


READ_APP = [{"name": "read_file", "args": {"path": "app.py"}}]
TOOLS_SCRIPT = {
    "replies": [
        {"text": "Let me read it.", "tool_calls": READ_APP},
        {"text": "It returns 1."},
        {"text": "Looking again.", "parts": 3, "tool_calls": READ_APP},
        {"text": "Still 1."},
    ]
}


def test_with_a_running_stack_the_answer_streams_to_stdout_and_tools_to_stderr(
    tmp_path: Path, project: Path
) -> None:
    with running_up(tmp_path, TOOLS_SCRIPT) as up:
        env = user_env(up)
        run = exec_(env, "what does answer return?", cwd=project)
        assert run.returncode == 0, run.stderr
        assert run.stdout == "Let me read it.\nIt returns 1.\n"
        assert "✓ read app.py" in run.stderr
        assert "starting one" not in run.stderr

        # The same session again, in JSON: one object per line.
        run = exec_(env, "--continue", "--json", "and now?", cwd=project)
        assert run.returncode == 0, run.stderr
        lines = json_lines(run.stdout)
        first, last = lines[0], lines[-1]
        listed = json.loads(up.cli("sessions", "list", "--json", env=env).stdout)
        assert {k: v for k, v in first.items() if k != "settings"} == {
            "type": "session",
            "session_id": listed[0]["id"],
            "cwd": str(project),
            "continued": True,
        }
        # The settings the turn runs with, and where they came from.
        assert first["settings"] == {
            "sandbox": "workspace-write",
            "approvals": "ask",
            "model": "",
            "network": False,
            "origin": "built-in",
            "sources": [],
            "problems": [],
        }
        kinds = [line["kind"] for line in events(lines)]
        for kind in ("user_message", "tool_call", "tool_result", "assistant_message"):
            assert kind in kinds
        assert kinds[-1] == "turn_end"
        user = next(e for e in events(lines) if e["kind"] == "user_message")
        assert user["event"]["userMessage"]["text"] == "and now?"
        deltas = [line["delta"] for line in lines if line["type"] == "text"]
        assert "".join(deltas) == "Looking again.Still 1."
        assert len(deltas) > 2  # live pieces, not the logged messages
        assert last["type"] == "turn_end" and last["reason"] == "completed"
        assert last["exit_code"] == 0 and last["usage"]["requests"] == 2
        assert last["usage"]["prompt_tokens"] > 0


SHELL = [{"name": "shell", "args": {"command": "echo ran-ok > ran.txt"}}]
ASKING_SCRIPT = {
    "replies": [
        {"text": "Running it.", "tool_calls": SHELL},
        {"text": "It was denied."},
        {"text": "Running it.", "tool_calls": SHELL},
        {"text": "Done."},
        {"text": "Here is my plan.", "tool_calls": plan_call("# Plan\n\n1. Write ran.txt")},
        {"text": "# Plan\n\n1. Write ran.txt"},
    ]
}


def test_what_exec_cannot_ask_is_denied_with_how_to_allow_it(tmp_path: Path, project: Path) -> None:
    with running_up(tmp_path, ASKING_SCRIPT) as up:
        env = user_env(up)
        run = exec_(env, "--json", "write ran.txt", cwd=project)
        assert run.returncode == 0, run.stderr
        assert (
            "denied `$ echo ran-ok > ran.txt`: exec cannot ask for approval; "
            "run agenthost exec with --approvals never"
        ) in said(run)
        assert not (project / "ran.txt").exists()
        result = next(e for e in events(json_lines(run.stdout)) if e["kind"] == "tool_result")
        error = result["event"]["toolResult"]["error"]
        assert "agenthost exec cannot ask for approval" in error
        assert "--approvals never" in error

        run = exec_(
            env, "--continue", "--json", "--approvals", "never", "write ran.txt", cwd=project
        )
        assert run.returncode == 0, run.stderr
        lines = json_lines(run.stdout)
        assert (lines[0]["settings"]["approvals"], lines[0]["settings"]["origin"]) == (
            "never",
            "session",
        )
        said_text = "".join(line["delta"] for line in lines if line["type"] == "text")
        assert said_text == "Running it.Done."
        assert (project / "ran.txt").read_text() == "ran-ok\n"
        assert "denied" not in run.stderr

        # A plan review: not approved; the model is told to answer with the plan.
        session_id = json.loads(up.cli("sessions", "list", "--json", env=env).stdout)[0]["id"]
        assert up.cli("plan", "set", session_id, "on", env=env).returncode == 0
        run = exec_(env, "--continue", "--json", "plan it", cwd=project)
        assert run.returncode == 0, run.stderr
        assert "the plan was not approved: exec cannot ask for a review" in said(run)
        lines = json_lines(run.stdout)
        result = next(e for e in events(lines) if e["kind"] == "tool_result")
        assert (
            "End your turn now with the plan as your answer"
            in (result["event"]["toolResult"]["error"])
        )
        deltas = "".join(line["delta"] for line in lines if line["type"] == "text")
        assert deltas.endswith("# Plan\n\n1. Write ran.txt")


@pytest.fixture
def no_stack(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A user's environment with no stack running: its data folder empty."""
    env = {**os.environ, "AGENTHOST_DATA_DIR": str(tmp_path / "data"), "NO_COLOR": "1"}
    for name in ("AGENTHOST_GATEWAY", "AGENTHOST_TOKEN", "AGENTHOST_BUILTIN_SCRIPT"):
        env.pop(name, None)
    yield env


def scripted(env: dict[str, str], tmp_path: Path, *replies: dict[str, Any]) -> dict[str, str]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": list(replies)}))
    return {**env, "AGENTHOST_BUILTIN_SCRIPT": str(path)}


def test_without_a_stack_it_starts_one_for_the_call_and_stops_it(
    no_stack: dict[str, str], tmp_path: Path, project: Path
) -> None:
    data = tmp_path / "data"
    run = exec_(no_stack, "hello", cwd=project)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Echo: hello\n"
    assert f"no agenthost stack is running: starting one for this call (data in {data})" in said(
        run
    )
    # Its data is where `agenthost up` keeps it; no address is left behind.
    assert (data / "sessionlog.db").exists() and (data / "token").exists()
    assert not (data / "gateway").exists()

    # The prompt from stdin: piped, or `-`.
    piped = exec_(no_stack, "--json", cwd=project, stdin="from stdin\n")
    assert piped.returncode == 0, piped.stderr
    started = json_lines(piped.stdout)[0]
    assert started["continued"] is False
    assert json_lines(piped.stdout)[-1]["reason"] == "completed"
    dashed = exec_(no_stack, "--json", "--continue", "-", cwd=project, stdin="and more")
    assert dashed.returncode == 0, dashed.stderr
    lines = json_lines(dashed.stdout)
    # --continue: the folder's most recent session, the one stdin started.
    assert lines[0]["session_id"] == started["session_id"] and lines[0]["continued"]
    assert "".join(line["delta"] for line in lines if line["type"] == "text") == "Echo: and more"
    # A reader that stops after the first line (the answer streams after
    # it): the turn still ends as it would, quietly.
    slow = scripted(no_stack, tmp_path, {"text": "a slow answer", "parts": 5, "delta_s": 0.2})
    reader = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "exec", "--json", "--continue", "once more"],
        cwd=project,
        env=slow,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout is not None and reader.stderr is not None
    assert json.loads(reader.stdout.readline())["type"] == "session"
    reader.stdout.close()
    assert reader.wait(TIMEOUT_S) == 0
    assert "Error" not in reader.stderr.read()
    reader.stderr.close()
    # A session it did not continue is a new one.
    assert (
        started["session_id"]
        != json_lines(exec_(no_stack, "--json", "x", cwd=project).stdout)[0]["session_id"]
    )


def test_exit_codes(no_stack: dict[str, str], tmp_path: Path, project: Path) -> None:
    # 1: the turn ended with an error (the model failed).
    failing = scripted(no_stack, tmp_path, {"error": {"message": "the provider is down"}})
    run = exec_(failing, "hello", cwd=project)
    assert run.returncode == 1, run.stderr
    assert "error: the provider is down" in said(run)
    assert run.stdout == ""

    # 2: usage errors and bad input.
    assert exec_(no_stack, "", cwd=project).returncode == 2
    assert exec_(no_stack, "--sandbox", "wide", "x", cwd=project).returncode == 2
    unknown = exec_(no_stack, "--model", "nope", "x", cwd=project)
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    assert "configured: builtin" in said(unknown)
    missing = exec_(no_stack, "--session", "s-nope", "x", cwd=project)
    assert missing.returncode == 2 and "SESSION_NOT_FOUND" in missing.stderr

    # 4: the stack could not be reached.
    nowhere = f"127.0.0.1:{free_base_port()}"
    away = exec_({**no_stack, "AGENTHOST_GATEWAY": nowhere}, "x", cwd=project)
    assert away.returncode == 4
    assert f"nothing answers at {nowhere} (from AGENTHOST_GATEWAY)" in said(away)


def test_ctrl_c_cancels_the_turn_records_it_and_exits_3(
    no_stack: dict[str, str], tmp_path: Path, project: Path
) -> None:
    env = scripted(no_stack, tmp_path, {"text": "This will take a while", "hold_s": 60})
    process = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "exec", "--json", "take your time"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:  # until the answer streams
            lines.append(json.loads(line))
            if lines[-1]["type"] == "text":
                break
        process.send_signal(signal.SIGINT)
        rest, stderr = process.communicate(timeout=TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 3, stderr
    lines += json_lines(rest)
    assert lines[-1]["type"] == "turn_end" and lines[-1]["reason"] == "cancelled"
    assert lines[-1]["exit_code"] == 3
    # Recorded: the log's turn/end says cancelled.
    assert events(lines)[-1]["event"]["turnEnd"]["reason"] == "TURN_END_REASON_CANCELLED"
    assert "cancelling the turn" in stderr


def test_a_recorded_stack_that_refuses_the_token_is_exit_4(tmp_path: Path, project: Path) -> None:
    with running_up(tmp_path, None) as up:
        env = {**user_env(up), "AGENTHOST_TOKEN": "another-stacks-token"}
        run = exec_(env, "hello", cwd=project)
    assert run.returncode == 4
    assert f"the gateway at {up.gateway} (from {up.data_dir / 'gateway'}, written by" in said(run)
    assert "starting one" not in run.stderr


def test_the_stack_exec_starts_gives_new_sessions_the_users_defaults(
    no_stack: dict[str, str], tmp_path: Path, project: Path
) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "settings.json").write_text('{"sandbox": "read-only", "network": true}')
    run = exec_({**no_stack, "AGENTHOST_CONFIG_DIR": str(config)}, "--json", "hi", cwd=project)
    assert run.returncode == 0, run.stderr
    settings = json_lines(run.stdout)[0]["settings"]
    assert (settings["sandbox"], settings["network"], settings["origin"]) == (
        "read-only",
        True,
        "defaults",
    )
    assert settings["sources"] == [str(config / "settings.json")]


async def test_a_turn_whose_runtime_died_ends_interrupted_and_exits_3(
    tmp_path: Path, project: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [{"text": "Working on it", "hold_s": 60}]}))
    async with process_stack(tmp_path / "data", {"AGENTHOST_BUILTIN_SCRIPT": str(script)}) as stack:
        env = {**os.environ, "AGENTHOST_GATEWAY": stack.gateway, "AGENTHOST_TOKEN": stack.token}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "clients.cli",
            "exec",
            "--json",
            "a long job",
            cwd=project,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert process.stdout is not None
            lines: list[dict[str, Any]] = []
            async with asyncio.timeout(TIMEOUT_S):
                while not lines or lines[-1]["type"] != "text":  # until the answer streams
                    lines.append(json.loads(await process.stdout.readline()))
            # The runtime dies with the turn open; the one started in its
            # place ends the turn as interrupted.
            stack.kill("agentruntime")
            await stack.restart("agentruntime")
            rest, stderr = await asyncio.wait_for(process.communicate(), TIMEOUT_S)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 3, stderr.decode()
    last = json_lines(rest.decode())[-1]
    assert (last["type"], last["reason"], last["exit_code"]) == ("turn_end", "interrupted", 3)
