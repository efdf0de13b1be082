"""File references and the task list in the web client, in a real browser
against `agenthost up`: clients/web/test/context.test.mjs drives Debian's
Chromium while the built-in model plays clients/web/test/context-script.json
(see there what each test does)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.hosts import REPO
from tests.support.node import INSTALL_TIMEOUT_S, agenthost_up, assert_passed, run, tool

WEB_DIR = REPO / "clients" / "web"
SCRIPT = WEB_DIR / "test" / "context-script.json"
SCREENSHOTS = REPO / "build" / "screenshots"
BROWSER_TIMEOUT_S = 180


def _project(tmp_path: Path) -> Path:
    assert Path("/usr/bin/chromium").is_file(), "needs Debian's chromium (.ci/prepare-chromium)"
    workspace = tmp_path / "project"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("def answer():\n    return 41\n")
    (tmp_path / "outside.txt").write_text("not the project's")
    return workspace


async def test_the_task_list_strip_and_at_paths_in_chromium(tmp_path: Path) -> None:
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
        argv = [
            node,
            "--test",
            "--test-concurrency=1",
            "--test-reporter=tap",
            "test/context.test.mjs",
        ]
        assert_passed(
            *await run(argv, WEB_DIR, env, BROWSER_TIMEOUT_S),
            (
                "the task list shows as a strip above the transcript as the turn changes it",
                "typing @ offers the folder's paths and the file taken is attached",
            ),
        )
    assert (SCREENSHOTS / "todos-strip.png").stat().st_size > 0
