"""The web client's search box, in Chromium (clients/web/test/search.test.mjs),
against `agenthost up` whose built-in model echoes: a word of a session's
second prompt finds that session alone, marked in its snippet; clicking the
hit opens it; a word nobody said shows an empty result; clearing the box
brings the workspace lists back. Needs node, npm and chromium; never skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.browser import built_web_client, page_test
from tests.support.node import INSTALL_TIMEOUT_S, agenthost_up

BROWSER_TESTS = (
    "two sessions are worked in, the second prompt of the first naming a quokka",
    "typing a word shows the sessions that said it, the word marked in the snippet",
    "clicking a hit opens its session",
    "a word no session said says so, and an empty box brings the lists back",
    "the page raised no errors",
)
BROWSER_TIMEOUT_S = 180


@pytest.mark.timeout(INSTALL_TIMEOUT_S * 2 + BROWSER_TIMEOUT_S + 60)
async def test_the_web_client_searches_sessions(tmp_path: Path) -> None:
    await built_web_client()
    workspace = tmp_path / "project"
    workspace.mkdir()
    async with agenthost_up(tmp_path / "data", {}) as up:
        env = {
            "AGENTHOST_PAGE_URL": str(up["page"]),
            "AGENTHOST_WORKSPACE": str(workspace.resolve()),
        }
        await page_test("search.test.mjs", env, BROWSER_TESTS, BROWSER_TIMEOUT_S)
