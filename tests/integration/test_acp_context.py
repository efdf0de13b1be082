"""File references and the task list over ACP: tests/acp/context.test.mjs
drives `agenthost acp` with the official ACP client library against a
stack whose built-in model plays tests/acp/context-script.json (then echoes
what it is sent), and validates every message against the protocol's
schema."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import cast

import pytest

from tests.support.hosts import REPO
from tests.support.node import agenthost_up, assert_passed, install_dependencies, run, tool

ACP_DIR = REPO / "tests" / "acp"
SCRIPT = ACP_DIR / "context-script.json"
NODE_TESTS = (
    "the task list is sent as plan updates as the turn changes it",
    "a resource link and an embedded resource reach the model",
    "a link to a file outside the project is refused with its reason",
    "every message the agent sent validates against the protocol's schema",
)
TIMEOUT_S = 120


@pytest.mark.timeout(3 * TIMEOUT_S)
async def test_an_editor_sees_the_plan_and_attaches_files_over_acp(tmp_path: Path) -> None:
    node = tool("node")
    await install_dependencies(ACP_DIR)
    data_dir = tmp_path / "data"
    workdir = tmp_path / "project"
    (workdir / "src").mkdir(parents=True)
    (workdir / "src" / "app.py").write_text("def answer():\n    return 41\n")
    (tmp_path / "outside.txt").write_text("not the project's")
    async with agenthost_up(data_dir, {"AGENTHOST_BUILTIN_SCRIPT": str(SCRIPT)}) as up:
        addresses = cast(dict[str, str], up["addresses"])
        env = {
            **os.environ,
            "AGENTHOST_GATEWAY": addresses["gateway"],
            "AGENTHOST_DATA_DIR": str(data_dir),
            "ACP_PYTHON": sys.executable,
            "ACP_REPO": str(REPO),
            "ACP_WORKDIR": str(workdir.resolve()),
            "ACP_OUTSIDE": str((tmp_path / "outside.txt").resolve()),
        }
        argv = [node, "--test", "--test-concurrency=1", "--test-reporter=tap", "context.test.mjs"]
        assert_passed(*await run(argv, ACP_DIR, env, TIMEOUT_S), NODE_TESTS)
