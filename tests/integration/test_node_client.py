"""The Node client (clients/node) against a running stack: its `node --test`
suite creates a session through the gateway, sets plan mode and reads the
change from the stream, and prompts the built-in model, scripted by
clients/node/test/builtin-script.json, to follow its reply as streamed deltas
(and as the text so far on reconnect and in OpenSession). Needs node and npm;
never skipped."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hosts import REPO

NODE_DIR = REPO / "clients" / "node"
DESCRIPTOR_SET = REPO / "gen" / "agenthost.binpb"
# The built-in model's replies, in the order the Node tests prompt.
BUILTIN_SCRIPT = NODE_DIR / "test" / "builtin-script.json"
# Node tests that must have run (and passed).
NODE_TESTS = (
    "setting plan mode shows on the stream and in PlanMode",
    "a streamed reply arrives as deltas before its logged message",
    "a reconnecting client and OpenSession get the text so far at offset 0",
    "offsets count code points, not UTF-16 units",
)
TIMEOUT_S = 30
INSTALL_TIMEOUT_S = 240


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"`{name}` is not on PATH: the Node client test needs Node 20+ and npm"
    return path


async def _run(argv: list[str], env: dict[str, str] | None, timeout_s: float) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=NODE_DIR,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, output.decode(errors="replace")


async def _install_dependencies() -> None:
    """`npm ci` when node_modules is missing or older than the lockfile."""
    installed = NODE_DIR / "node_modules" / ".package-lock.json"
    lock = NODE_DIR / "package-lock.json"
    if installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime:
        return
    code, output = await _run(
        [_tool("npm"), "ci", "--no-audit", "--no-fund"], None, INSTALL_TIMEOUT_S
    )
    assert code == 0, f"npm ci failed:\n{output}"


def _read_up_line(process: subprocess.Popen[str]) -> dict[str, str]:
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith('{"agenthost": "up"'):
            return dict(json.loads(line)["addresses"])
    raise RuntimeError(f"agenthost up exited with {process.wait()}")


def _tap_counts(output: str) -> dict[str, int]:
    return {name: int(n) for name, n in re.findall(r"^# (\w+) (\d+)$", output, re.MULTILINE)}


@pytest.mark.timeout(INSTALL_TIMEOUT_S + 3 * TIMEOUT_S)
async def test_node_client_sets_plan_mode_and_reads_it_from_the_stream(tmp_path: Path) -> None:
    node = _tool("node")
    assert DESCRIPTOR_SET.exists(), "run `make gen` first"
    await _install_dependencies()
    data_dir = tmp_path / "data"
    stack_env = {**os.environ, "AGENTHOST_BUILTIN_SCRIPT": str(BUILTIN_SCRIPT)}
    # The built-in model, not a real one the environment might name.
    stack_env.pop("AGENTHOST_MODEL_BASE_URL", None)
    up = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "up", "--free-ports", "--data-dir", str(data_dir)],
        cwd=REPO,
        env=stack_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        addresses = await asyncio.wait_for(asyncio.to_thread(_read_up_line, up), TIMEOUT_S)
        env = {
            **os.environ,
            "AGENTHOST_GATEWAY": addresses["gateway"],
            "AGENTHOST_TOKEN": (data_dir / "token").read_text().strip(),
            "AGENTHOST_DESCRIPTOR_SET": str(DESCRIPTOR_SET),
        }
        code, output = await _run([node, "--test", "--test-reporter=tap"], env, TIMEOUT_S)
        counts = _tap_counts(output)
        assert code == 0, output
        assert counts.get("tests", 0) > 0, f"node --test ran no test:\n{output}"
        assert counts.get("pass") == counts["tests"], output
        for name in NODE_TESTS:
            assert re.search(rf"^\s*ok \d+ - {re.escape(name)}$", output, re.MULTILINE), (
                f"node test {name!r} did not pass:\n{output}"
            )
        up.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(asyncio.to_thread(up.wait), TIMEOUT_S) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        if up.stdout is not None:
            up.stdout.close()
