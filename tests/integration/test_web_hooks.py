"""Hooks in the web client, in a real browser against `agenthost up`:
clients/web/test/hooks.test.mjs drives Debian's Chromium while the built-in
model plays clients/web/test/hooks-script.json in a project whose
.claude/settings.json has hooks in Claude Code's format."""

from __future__ import annotations

import json
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
SCRIPT = WEB_DIR / "test" / "hooks-script.json"
SCREENSHOTS = REPO / "build" / "screenshots"
BROWSER_TIMEOUT_S = 180
GUARD = """\
import json, sys
command = json.load(sys.stdin)["tool_input"].get("command", "")
if "rm -rf" in command:
    print("rm -rf is not for this project", file=sys.stderr)
    sys.exit(2)
"""


def _project(tmp_path: Path) -> Path:
    assert Path("/usr/bin/chromium").is_file(), "needs Debian's chromium (.ci/prepare-chromium)"
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
        argv = [node, "--test", "--test-reporter=tap", "test/hooks.test.mjs"]
        assert_passed(
            *await run(argv, WEB_DIR, env, BROWSER_TIMEOUT_S),
            ("each hook's run is a row of the transcript where it ran, and stays there",),
        )
    assert (SCREENSHOTS / "hook-rows.png").stat().st_size > 0
