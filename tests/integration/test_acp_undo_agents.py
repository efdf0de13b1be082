"""The way back and subagents over ACP: tests/acp/undo.test.mjs drives
`agenthost acp` with the official ACP client library against a stack whose
built-in model plays tests/acp/undo-script.json (a turn that writes a file;
a task call whose subagent runs a command, which asks), and validates every
message against the protocol's schema."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import cast

import pytest

from tests.support.hosts import REPO
from tests.support.node import agenthost_up, assert_passed, install_dependencies, run, tool

ACP_DIR = REPO / "tests" / "acp"
SCRIPT = ACP_DIR / "undo-script.json"
NODE_TESTS = (
    "undo, redo, rewind and diff are offered, and undo asks before overwriting a changed file",
    "a task call is a think tool call with its subagent's steps, and the subagent's approval "
    "names it",
)
TIMEOUT_S = 120


@pytest.mark.timeout(3 * TIMEOUT_S)
async def test_an_editor_undoes_turns_and_follows_subagents_over_acp(tmp_path: Path) -> None:
    node = tool("node")
    await install_dependencies(ACP_DIR)
    data_dir = tmp_path / "data"
    workdir = tmp_path / "project"
    workdir.mkdir()
    (workdir / "a.txt").write_text("a\n")
    async with agenthost_up(data_dir, {"AGENTHOST_BUILTIN_SCRIPT": str(SCRIPT)}) as up:
        addresses = cast(dict[str, str], up["addresses"])
        env = {
            **os.environ,
            "AGENTHOST_GATEWAY": addresses["gateway"],
            "AGENTHOST_DATA_DIR": str(data_dir),
            "ACP_PYTHON": sys.executable,
            "ACP_REPO": str(REPO),
            "ACP_WORKDIR": str(workdir.resolve()),
        }
        argv = [node, "--test", "--test-concurrency=1", "--test-reporter=tap", "undo.test.mjs"]
        assert_passed(*await run(argv, ACP_DIR, env, TIMEOUT_S), NODE_TESTS)
