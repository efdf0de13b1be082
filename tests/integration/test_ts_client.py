"""The TypeScript SDK (clients/ts) against a running stack.

`make ts` installs its pinned npm packages (`npm ci`), generates its
protobuf-es stubs from gen/agenthost.binpb with `buf generate`, type-checks
it (`tsc --noEmit`) and compiles it; then its `node --test` suite runs
against a fresh stack whose built-in model is scripted with
clients/ts/test/builtin-script.json: streamed text and snapshots on
reconnect, a pending plan choice read from the stream, a resumed stream
with cursors, typed STALE and validation errors. Needs node and npm; never
skipped."""

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

TS_DIR = REPO / "clients" / "ts"
# The built-in model's replies, in the order the TS tests prompt.
BUILTIN_SCRIPT = TS_DIR / "test" / "builtin-script.json"
# TS tests that must have run (and passed).
TS_TESTS = (
    "setting plan mode shows on the stream and in PlanMode",
    "a streamed reply arrives as deltas before its logged message",
    "a reconnecting client and OpenSession get the text so far at offset 0",
    "a pending plan choice made by another client is read from the stream",
    "a resumed stream presents its cursor and delivers every event exactly once",
    "a request older than one applied is refused with a typed STALE error",
    "an invalid request is refused with its field violations",
    "offsets count code points, not UTF-16 units (offline)",
    "replies, values and commits in any order end at the state of the highest seq",
)
TIMEOUT_S = 60
BUILD_TIMEOUT_S = 300


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"`{name}` is not on PATH: the TypeScript SDK test needs Node 20+ and npm"
    return path


async def _run(
    argv: list[str], cwd: Path, env: dict[str, str] | None, timeout_s: float
) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, output.decode(errors="replace")


def _read_up_line(process: subprocess.Popen[str]) -> dict[str, str]:
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith('{"agenthost": "up"'):
            return dict(json.loads(line)["addresses"])
    raise RuntimeError(f"agenthost up exited with {process.wait()}")


def _tap_counts(output: str) -> dict[str, int]:
    return {name: int(n) for name, n in re.findall(r"^# (\w+) (\d+)$", output, re.MULTILINE)}


def _start_stack(data_dir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "AGENTHOST_BUILTIN_SCRIPT": str(BUILTIN_SCRIPT)}
    # The built-in model, not a real one the environment might name.
    env.pop("AGENTHOST_MODEL_BASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "up", "--free-ports", "--data-dir", str(data_dir)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def _assert_passed(code: int, output: str) -> None:
    counts = _tap_counts(output)
    assert code == 0, output
    assert counts.get("tests", 0) > 0, f"node --test ran no test:\n{output}"
    assert counts.get("pass") == counts["tests"], output
    for name in TS_TESTS:
        assert re.search(rf"^\s*ok \d+ - {re.escape(name)}$", output, re.MULTILINE), (
            f"TS test {name!r} did not pass:\n{output}"
        )


@pytest.mark.timeout(BUILD_TIMEOUT_S + 3 * TIMEOUT_S)
async def test_ts_sdk_passes_its_suite_against_a_running_gateway(tmp_path: Path) -> None:
    node = _tool("node")
    _tool("npm")
    code, output = await _run([_tool("make"), "ts"], REPO, None, BUILD_TIMEOUT_S)
    assert code == 0, f"make ts (npm ci, buf generate, tsc) failed:\n{output}"
    data_dir = tmp_path / "data"
    up = _start_stack(data_dir)
    try:
        addresses = await asyncio.wait_for(asyncio.to_thread(_read_up_line, up), TIMEOUT_S)
        env = {
            **os.environ,
            "AGENTHOST_GATEWAY": addresses["gateway"],
            "AGENTHOST_TOKEN": (data_dir / "token").read_text().strip(),
        }
        # One test file at a time: the prompting tests consume the script in order.
        argv = [node, "--test", "--test-concurrency=1", "--test-reporter=tap", "build/test/"]
        _assert_passed(*await _run(argv, TS_DIR, env, TIMEOUT_S))
        up.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(asyncio.to_thread(up.wait), TIMEOUT_S) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        if up.stdout is not None:
            up.stdout.close()
