"""File references and the task list in the web client, in a real browser
against `agenthost up`: clients/web/test/context.test.mjs drives Debian's
Chromium while the built-in model plays clients/web/test/context-script.json
(see there what each test does)."""

from __future__ import annotations

from pathlib import Path

from tests.support.browser import SCREENSHOTS, WEB_DIR, built_web_client, page_test
from tests.support.node import agenthost_up

SCRIPT = WEB_DIR / "test" / "context-script.json"
BROWSER_TIMEOUT_S = 180


def _project(tmp_path: Path) -> Path:
    workspace = tmp_path / "project"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("def answer():\n    return 41\n")
    (tmp_path / "outside.txt").write_text("not the project's")
    return workspace


async def test_the_task_list_strip_and_at_paths_in_chromium(tmp_path: Path) -> None:
    workspace = _project(tmp_path)
    await built_web_client()
    async with agenthost_up(tmp_path / "data", {"AGENTHOST_BUILTIN_SCRIPT": str(SCRIPT)}) as up:
        env = {
            "AGENTHOST_PAGE_URL": str(up["page"]),
            "AGENTHOST_WORKSPACE": str(workspace.resolve()),
        }
        await page_test(
            "context.test.mjs",
            env,
            (
                "the task list shows as a strip above the transcript as the turn changes it",
                "typing @ offers the folder's paths and the file taken is attached",
            ),
            BROWSER_TIMEOUT_S,
        )
    assert (SCREENSHOTS / "todos-strip.png").stat().st_size > 0
