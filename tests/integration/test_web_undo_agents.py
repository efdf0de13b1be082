"""Undo and subagents in the web client, in a real browser against
`agenthost up`: clients/web/test/undo.test.mjs drives Debian's Chromium
while the built-in model plays clients/web/test/undo-script.json (a turn
that writes a file; a task call whose subagent runs a command, which asks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.agentruntime.confinement import probe
from tests.support.browser import SCREENSHOTS, WEB_DIR, built_web_client, page_test
from tests.support.node import agenthost_up

pytestmark = pytest.mark.skipif(
    probe() is not None, reason=f"commands cannot be confined here: {probe()}"
)

SCRIPT = WEB_DIR / "test" / "undo-script.json"
BROWSER_TIMEOUT_S = 180


def _project(tmp_path: Path) -> Path:
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a\n")
    return workspace


async def test_undo_and_subagents_in_chromium(tmp_path: Path) -> None:
    workspace = _project(tmp_path)
    await built_web_client()
    async with agenthost_up(tmp_path / "data", {"AGENTHOST_BUILTIN_SCRIPT": str(SCRIPT)}) as up:
        env = {
            "AGENTHOST_PAGE_URL": str(up["page"]),
            "AGENTHOST_WORKSPACE": str(workspace.resolve()),
        }
        await page_test(
            "undo.test.mjs",
            env,
            (
                "a turn's files show with their diff and undo; redo asks before overwriting",
                "a subagent's approval is answered in the page and its transcript opens "
                "from its task call",
            ),
            BROWSER_TIMEOUT_S,
        )
    for shot in ("turn-changes.png", "subagent-row.png"):
        assert (SCREENSHOTS / shot).stat().st_size > 0
