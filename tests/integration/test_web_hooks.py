"""Hooks in the web client, in a real browser against `agenthost up`:
clients/web/test/hooks.test.mjs drives Debian's Chromium while the built-in
model plays clients/web/test/hooks-script.json in a project whose
.claude/settings.json has hooks in Claude Code's format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.agentruntime.confinement import probe
from tests.support.browser import SCREENSHOTS, WEB_DIR, built_web_client, page_test
from tests.support.node import agenthost_up

pytestmark = pytest.mark.skipif(
    probe() is not None, reason=f"commands cannot be confined here: {probe()}"
)

SCRIPT = WEB_DIR / "test" / "hooks-script.json"
BROWSER_TIMEOUT_S = 180
GUARD = """\
import json, sys
command = json.load(sys.stdin)["tool_input"].get("command", "")
if "rm -rf" in command:
    print("rm -rf is not for this project", file=sys.stderr)
    sys.exit(2)
"""


def _project(tmp_path: Path) -> Path:
    workspace = tmp_path / "project"
    (workspace / ".claude" / "hooks").mkdir(parents=True)
    (workspace / ".claude" / "hooks" / "guard.py").write_text(GUARD)
    guard = 'python3 "$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.py'
    ticket = "echo 'no ticket service here' >&2; exit 1"
    hooks = {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": ticket}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": guard}]}],
    }
    (workspace / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    return workspace


async def test_hook_runs_are_rows_of_the_transcript_in_chromium(tmp_path: Path) -> None:
    workspace = _project(tmp_path)
    await built_web_client()
    async with agenthost_up(tmp_path / "data", {"AGENTHOST_BUILTIN_SCRIPT": str(SCRIPT)}) as up:
        env = {
            "AGENTHOST_PAGE_URL": str(up["page"]),
            "AGENTHOST_WORKSPACE": str(workspace.resolve()),
        }
        await page_test(
            "hooks.test.mjs",
            env,
            ("each hook's run is a row of the transcript where it ran, and stays there",),
            BROWSER_TIMEOUT_S,
        )
    assert (SCREENSHOTS / "hook-rows.png").stat().st_size > 0
