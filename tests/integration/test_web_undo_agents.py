"""Undo and subagents in the web client, in a real browser against
`agenthost up`: clients/web/test/undo.test.mjs drives Debian's Chromium
while the built-in model plays clients/web/test/undo-script.json (a turn
that writes a file; a task call whose subagent runs a command, which asks)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.agentruntime.confinement import probe
from tests.support.hosts import REPO
from tests.support.node import INSTALL_TIMEOUT_S, agenthost_up, assert_passed, run, tool

pytestmark = pytest.mark.skipif(
    probe() is not None, reason=f"commands cannot be confined here: {probe()}"
)

WEB_DIR = REPO / "clients" / "web"
SCRIPT = WEB_DIR / "test" / "undo-script.json"
SCREENSHOTS = REPO / "build" / "screenshots"
BROWSER_TIMEOUT_S = 180


def _project(tmp_path: Path) -> Path:
    assert Path("/usr/bin/chromium").is_file(), "needs Debian's chromium (.ci/prepare-chromium)"
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a\n")
    return workspace


async def test_undo_and_subagents_in_chromium(tmp_path: Path) -> None:
    workspace = _project(tmp_path)
    node = tool("node")
    code, output = await run([tool("make"), "web"], REPO, None, INSTALL_TIMEOUT_S)
    assert code == 0, output
    async with agenthost_up(tmp_path / "data", {"AGENTHOST_BUILTIN_SCRIPT": str(SCRIPT)}) as up:
        env = {
            **os.environ,
            "AGENTHOST_PAGE_URL": str(up["page"]),
            "AGENTHOST_WORKSPACE": str(workspace.resolve()),
            "SCREENSHOT_DIR": str(SCREENSHOTS),
        }
        argv = [node, "--test", "--test-reporter=tap", "test/undo.test.mjs"]
        assert_passed(
            *await run(argv, WEB_DIR, env, BROWSER_TIMEOUT_S),
            (
                "a turn's files show with their diff and undo; redo asks before overwriting",
                "a subagent's approval is answered in the page and its transcript opens "
                "from its task call",
            ),
        )
    for shot in ("turn-changes.png", "subagent-row.png"):
        assert (SCREENSHOTS / shot).stat().st_size > 0
