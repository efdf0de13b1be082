"""The web client in a window 800 px wide, in Chromium
(clients/web/test/narrow.test.mjs), against `agenthost up` whose built-in
model plays clients/web/test/narrow-script.json: the transcript says it
waits while the first token is slow to come; two sessions of one title are
told apart in the sidebar (time and a short id); the sidebar is narrow and
keeps each title on one row; a command's answer below the transcript
leaves the last reply in view. Needs node, npm and chromium; never skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.browser import WEB_DIR, built_web_client, page_test
from tests.support.node import INSTALL_TIMEOUT_S, agenthost_up

SCRIPT = WEB_DIR / "test" / "narrow-script.json"
BROWSER_TESTS = (
    "while the first token is awaited the transcript says so, and not once text comes",
    "two sessions of the same title are told apart in the sidebar by time and id",
    "at 800 px the sidebar and the heading keep each title on one row, the sidebar narrow",
    "a command's answer below the transcript leaves the last reply in view",
    "the page raised no errors",
)
BROWSER_TIMEOUT_S = 180


@pytest.mark.timeout(INSTALL_TIMEOUT_S * 2 + BROWSER_TIMEOUT_S + 60)
async def test_the_web_client_reads_well_800_px_wide(tmp_path: Path) -> None:
    await built_web_client()
    workspace = tmp_path / "project"
    workspace.mkdir()
    async with agenthost_up(tmp_path / "data", {"AGENTHOST_BUILTIN_SCRIPT": str(SCRIPT)}) as up:
        env = {
            "AGENTHOST_PAGE_URL": str(up["page"]),
            "AGENTHOST_WORKSPACE": str(workspace.resolve()),
        }
        await page_test("narrow.test.mjs", env, BROWSER_TESTS, BROWSER_TIMEOUT_S)
