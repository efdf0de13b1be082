"""Running a Node package's `node --test` suite from pytest: the tools,
`npm ci` when needed, a command's output, TAP counts, and a stack started
with `agenthost up` for the suite to talk to."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from tests.support.hosts import REPO

INSTALL_TIMEOUT_S = 240
UP_TIMEOUT_S = 60


def tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"`{name}` is not on PATH: the Node tests need Node 20+ and npm"
    return path


async def run(
    argv: list[str], cwd: Path, env: dict[str, str] | None, timeout_s: float
) -> tuple[int, str]:
    """Exit code and output (stdout and stderr together)."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
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


async def install_dependencies(package: Path) -> None:
    """`npm ci` when node_modules is missing or older than the lockfile."""
    installed = package / "node_modules" / ".package-lock.json"
    lock = package / "package-lock.json"
    if installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime:
        return
    code, output = await run(
        [tool("npm"), "ci", "--no-audit", "--no-fund"], package, None, INSTALL_TIMEOUT_S
    )
    assert code == 0, f"npm ci failed:\n{output}"


def tap_counts(output: str) -> dict[str, int]:
    return {name: int(n) for name, n in re.findall(r"^# (\w+) (\d+)$", output, re.MULTILINE)}


def assert_passed(code: int, output: str, names: tuple[str, ...]) -> None:
    """Every test of a TAP run passed, and at least those named ran."""
    counts = tap_counts(output)
    assert code == 0, output
    assert counts.get("tests", 0) > 0, f"node --test ran no test:\n{output}"
    assert counts.get("pass") == counts["tests"], output
    for name in names:
        assert re.search(rf"^\s*ok \d+ - {re.escape(name)}$", output, re.MULTILINE), (
            f"node test {name!r} did not pass:\n{output}"
        )


def read_up_line(process: subprocess.Popen[str]) -> dict[str, object]:
    """The JSON line `agenthost up` prints once it serves."""
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith('{"agenthost": "up"'):
            return dict(json.loads(line))
    raise RuntimeError(f"agenthost up exited with {process.wait()}")


@asynccontextmanager
async def agenthost_up(
    data_dir: Path, env: Mapping[str, str] | None = None
) -> AsyncIterator[dict[str, object]]:
    """`agenthost up --free-ports` with the built-in model (`env` adds to the
    environment: its script, say); its up line. A suite that passed stops it
    with one Ctrl-C, which must end it cleanly."""
    # A models file only when `env` names one (the shell's might list real models).
    stack_env = {k: v for k, v in os.environ.items() if k != "AGENTHOST_MODELS_FILE"}
    stack_env.update(env or {})
    # What the shell may name instead: a real model, another page.
    stack_env.pop("AGENTHOST_MODEL_BASE_URL", None)
    stack_env.pop("AGENTHOST_WEB_FILES_DIR", None)
    up = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "up", "--free-ports", "--data-dir", str(data_dir)],
        cwd=REPO,
        env=stack_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield await asyncio.wait_for(asyncio.to_thread(read_up_line, up), UP_TIMEOUT_S)
        up.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(asyncio.to_thread(up.wait), UP_TIMEOUT_S) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        if up.stdout is not None:
            up.stdout.close()
