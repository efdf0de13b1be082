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


async def test_up_serves_the_first_call_from_the_readme(tmp_path: Path) -> None:
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "clients.cli",
            "up",
            "--free-ports",
            "--data-dir",
            str(tmp_path / "data"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
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
        up.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(asyncio.to_thread(up.wait), TIMEOUT_S) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
