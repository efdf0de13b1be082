"""Hooks in `agenthost chat`, in a real terminal (a pty, through pexpect),
against `agenthost up` in its own process with its built-in model
scripted: a hook's run is one dim line where it happened, in the live
turn and in the session's past, and /hooks lists what the session runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.agentruntime.confinement import probe
from tests.integration.test_cli import chat, expect_all, running_up

pytestmark = pytest.mark.skipif(
    probe() is not None, reason=f"commands cannot be confined here: {probe()}"
)

GUARD = """\
import json, sys
command = json.load(sys.stdin)["tool_input"].get("command", "")
if "rm -rf" in command:
    print("rm -rf is not for this project", file=sys.stderr)
    sys.exit(2)
"""
SCRIPT = {
    "replies": [
        {"tool_calls": [{"name": "shell", "args": {"command": "rm -rf build"}}]},
        {"text": "The hook refused it."},
    ]
}
BLOCKED = "· hook PreToolUse: blocked the call (exit 2): rm -rf is not for this project"


def test_a_hooks_run_shows_as_one_line_live_and_in_the_past(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".claude" / "hooks").mkdir(parents=True)
    (project / ".claude" / "hooks" / "guard.py").write_text(GUARD)
    guard = {"type": "command", "command": 'python3 "$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.py'}
    settings = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [guard]}]}}
    (project / ".claude" / "settings.json").write_text(json.dumps(settings))
    with running_up(tmp_path, SCRIPT) as up:
        child = chat(up, "--workspace", str(project))
        try:
            child.expect_exact("plan: off")
            child.expect_exact(">")
            child.sendline("clean the build")
            child.expect_exact(BLOCKED)
            child.expect_exact("The hook refused it.")
            child.expect_exact(">")
            child.sendline("/hooks")
            child.expect_exact("PreToolUse [Bash]: python3")
        finally:
            child.sendline("/quit")
            child.close()
        # The session's past, as a chat that continues it shows it.
        child = chat(up, "--workspace", str(project), "--continue")
        try:
            expect_all(child, "you: clean the build", BLOCKED, "The hook refused it.")
        finally:
            child.sendline("/quit")
            child.close()
