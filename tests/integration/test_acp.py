"""`agenthost acp` as editors use it: tests/acp's `node --test` suite drives it
with the official ACP client library (@agentclientprotocol/sdk, pinned in
tests/acp/package-lock.json) against a stack whose built-in model is
scripted with tests/acp/builtin-script.json, and validates every message the
agent sends against the protocol's JSON schema (ajv)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import cast

import pytest

from tests.support.hosts import REPO
from tests.support.node import agenthost_up, assert_passed, install_dependencies, run, tool

ACP_DIR = REPO / "tests" / "acp"
BUILTIN_SCRIPT = ACP_DIR / "builtin-script.json"
NODE_TESTS = (
    "a new session offers the default and plan modes and lists its commands",
    "tool calls that need permission are allowed and show a diff and output",
    "plan mode chosen during a turn is committed at the next model request",
    "a second editor loads the session with the same history, then cancels a turn",
    "a custom command of the project is offered and runs with its arguments",
    "every message the agent sent validates against the protocol's schema",
)
TIMEOUT_S = 120
REVIEW_COMMAND = (
    "---\ndescription: Review a file for one concern\nargument-hint: FILE CONCERN\n---\n"
    "Review $1, looking for $2 only.\n"
)


@pytest.mark.timeout(3 * TIMEOUT_S)
async def test_an_editor_drives_sessions_over_acp(tmp_path: Path) -> None:
    node = tool("node")
    await install_dependencies(ACP_DIR)
    data_dir = tmp_path / "data"
    workdir = tmp_path / "project"
    # A custom command, as Claude Code users write one.
    (workdir / ".claude" / "commands").mkdir(parents=True)
    (workdir / ".claude" / "commands" / "review.md").write_text(REVIEW_COMMAND)
    async with agenthost_up(data_dir, {"AGENTHOST_BUILTIN_SCRIPT": str(BUILTIN_SCRIPT)}) as up:
        addresses = cast(dict[str, str], up["addresses"])
        env = {
            **os.environ,
            "AGENTHOST_GATEWAY": addresses["gateway"],
            "AGENTHOST_DATA_DIR": str(data_dir),
            "ACP_PYTHON": sys.executable,
            "ACP_REPO": str(REPO),
            "ACP_WORKDIR": str(workdir.resolve()),
        }
        argv = [node, "--test", "--test-concurrency=1", "--test-reporter=tap", "acp.test.mjs"]
        assert_passed(*await run(argv, ACP_DIR, env, TIMEOUT_S), NODE_TESTS)
        assert (workdir / "NOTES.md").read_text() == "# Notes\n\nfrom the editor\n"
