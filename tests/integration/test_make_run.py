"""`agenthost up` (what `make run` starts) and the README's first call."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.hosts import REPO

TIMEOUT_S = 30


def _read_up_line(process: subprocess.Popen[str]) -> dict[str, str]:
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith('{"agenthost": "up"'):
            return dict(json.loads(line)["addresses"])
    raise RuntimeError(f"agenthost up exited with {process.wait()}")


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
        addresses = await asyncio.wait_for(asyncio.to_thread(_read_up_line, up), TIMEOUT_S)
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


async def test_the_demo_script_loads(tmp_path: Path) -> None:
    """The README's demo script streams, calls tools and presents a plan."""
    from services.agentruntime.models.builtin import BuiltinAdapter, load_script

    replies = load_script(REPO / "examples" / "builtin-demo.json")
    calls = [call.name for reply in replies for call in reply.tool_calls]
    assert {"list_dir", "write_file", "shell", "exit_plan_mode"} <= set(calls)
    assert BuiltinAdapter(replies).pending == len(replies)
