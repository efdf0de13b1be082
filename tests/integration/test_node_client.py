"""The Node client (clients/node) against a running stack: its `node --test`
suite creates a session through the gateway, sets plan mode and reads the
change from the stream, and prompts the built-in model, scripted by
clients/node/test/builtin-script.json, to follow its reply as streamed deltas
(and as the text so far on reconnect and in OpenSession). Needs node and npm;
never skipped."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hosts import REPO
from tests.support.node import (
    INSTALL_TIMEOUT_S,
    assert_passed,
    install_dependencies,
    read_up_line,
    run,
    tool,
)

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


@pytest.mark.timeout(INSTALL_TIMEOUT_S + 3 * TIMEOUT_S)
async def test_node_client_sets_plan_mode_and_reads_it_from_the_stream(tmp_path: Path) -> None:
    node = tool("node")
    assert DESCRIPTOR_SET.exists(), "run `make gen` first"
    await install_dependencies(NODE_DIR)
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
        up_line = await asyncio.wait_for(asyncio.to_thread(read_up_line, up), TIMEOUT_S)
        addresses = up_line["addresses"]
        assert isinstance(addresses, dict)
        env = {
            **os.environ,
            "AGENTHOST_GATEWAY": addresses["gateway"],
            "AGENTHOST_TOKEN": (data_dir / "token").read_text().strip(),
            "AGENTHOST_DESCRIPTOR_SET": str(DESCRIPTOR_SET),
        }
        code, output = await run([node, "--test", "--test-reporter=tap"], NODE_DIR, env, TIMEOUT_S)
        assert_passed(code, output, NODE_TESTS)
        up.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(asyncio.to_thread(up.wait), TIMEOUT_S) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        if up.stdout is not None:
            up.stdout.close()
