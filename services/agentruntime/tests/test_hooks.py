"""Hook settings as Claude Code writes them, and what a hook's answer means
(the runs themselves: tests/integration/test_hooks.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from services.agentruntime.capabilities.hooks.running import answer_of, strongest
from services.agentruntime.capabilities.hooks.settings import Hook, load_hooks, parse_hooks
from services.agentruntime.claude_names import claude_input, claude_names
from services.agentruntime.shell import ShellResult


def hook(event: str, matcher: str = "") -> Hook:
    return Hook(event, matcher, "check", 60.0, "settings.json")


def ran(code: int | None, output: str = "", errors: str = "", refused: str = "") -> ShellResult:
    return ShellResult(code, output, code is None and not refused, False, 0.1, refused, errors)


def test_settings_in_claude_codes_format_are_read_and_what_cannot_be_used_is_said() -> None:
    given = {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "guard", "timeout": 5}]},
            {"matcher": "(", "hooks": [{"type": "command", "command": "never"}]},
        ],
        "Stop": [{"hooks": [{"type": "prompt", "prompt": "done?"}, {"command": "check"}]}],
        "PermissionRequest": [{"hooks": [{"type": "command", "command": "x"}]}],
        "PostToolUse": [{"hooks": [{"type": "command", "command": "fmt", "timeout": "soon"}]}],
    }
    hooks, problems = parse_hooks("s.json", given)
    assert hooks == [
        Hook("PreToolUse", "Bash", "guard", 5.0, "s.json"),
        Hook("Stop", "", "check", 60.0, "s.json"),
    ]
    assert len(problems) == 4
    assert "not a regular expression" in problems[0]
    assert "only command hooks run here" in problems[1]
    assert "not an event agenthost runs hooks for" in problems[2]
    assert "'soon' is not a number of seconds" in problems[3]


def test_every_file_is_read_and_a_command_given_twice_runs_once(tmp_path: Path) -> None:
    folder, config = tmp_path / "project", tmp_path / "config"
    (folder / ".claude").mkdir(parents=True)
    (folder / ".agenthost").mkdir()
    config.mkdir()
    entry = {"Stop": [{"hooks": [{"type": "command", "command": "same"}]}]}
    for path in (
        config / "settings.json",
        folder / ".agenthost" / "settings.json",
        folder / ".claude" / "settings.json",
    ):
        path.write_text(json.dumps({"model": "fast", "hooks": entry}))
    (folder / ".claude" / "settings.local.json").write_text("{not json")
    settings = load_hooks(folder, config)
    assert [h.source for h in settings.hooks] == [
        str(config / "settings.json"),
        str(folder / ".agenthost" / "settings.json"),
        str(folder / ".claude" / "settings.json"),
    ]
    assert [h.command for h in settings.of("Stop")] == ["same"]
    (problem,) = settings.problems
    assert "settings.local.json: is not valid JSON" in problem


@pytest.mark.parametrize(
    ("matcher", "tool", "matches"),
    [
        ("Bash", "shell", True),
        ("Edit|Write", "edit_file", True),
        ("Edit|Write", "write_file", True),
        ("MultiEdit", "edit_file", True),
        ("Edit", "read_file", False),
        ("Bash", "mcp__bash__run", False),
        ("shell", "shell", True),
        ("mcp__memory__.*", "mcp__memory__create", True),
        ("mcp__memory__.*", "mcp__other__create", False),
        ("", "glob", True),
        ("*", "mcp__x__y", True),
    ],
)
def test_matchers_name_tools_as_claude_code_does(matcher: str, tool: str, matches: bool) -> None:
    assert hook("PreToolUse", matcher).matches(claude_names(tool)) is matches


def test_a_calls_arguments_are_named_as_claude_codes_tools_take_them(tmp_path: Path) -> None:
    edit = {"path": "src/a.py", "old_string": "x", "new_string": "y"}
    assert claude_input("edit_file", edit, tmp_path) == {
        "file_path": str(tmp_path / "src" / "a.py"),
        "old_string": "x",
        "new_string": "y",
    }
    assert claude_input("shell", {"command": "ls", "timeout_s": 2}, tmp_path) == {
        "command": "ls",
        "timeout": 2000,
    }
    assert claude_input("grep", {"pattern": "x", "path": "."}, tmp_path)["path"] == str(tmp_path)


@pytest.mark.parametrize(
    ("event", "decision"),
    [
        ("PreToolUse", "deny"),
        ("PostToolUse", "block"),
        ("UserPromptSubmit", "block"),
        ("Stop", "block"),
        ("SubagentStop", "block"),
        ("Notification", ""),
        ("PreCompact", ""),
        ("SessionStart", ""),
        ("SessionEnd", ""),
    ],
)
def test_exit_code_2_blocks_where_the_event_can_be_blocked(event: str, decision: str) -> None:
    answer = answer_of(hook(event), ran(2, "ignored", "not like that\n"))
    assert answer.decision == decision
    if decision:
        assert answer.reason == "not like that" and not answer.note
    else:
        assert answer.note == "exit 2: not like that"


def test_other_exit_codes_timeouts_and_no_confinement_are_notes_only() -> None:
    failed = answer_of(hook("PreToolUse"), ran(1, errors="boom\nmore"))
    assert (failed.decision, failed.note) == ("", "exit 1 (a non-blocking error): boom")
    hung = answer_of(hook("Stop"), ran(None))
    assert (hung.decision, hung.note) == ("", "timed out after 60 s and was stopped")
    refused = answer_of(hook("Stop"), ran(None, refused="Not run: no bwrap"))
    assert (refused.decision, refused.note) == ("", "Not run: no bwrap")


def answered(event: str, given: object) -> tuple[str, str, str]:
    answer = answer_of(hook(event), ran(0, json.dumps(given)))
    return answer.decision, answer.reason, answer.context


def test_json_answers_mean_what_they_mean_in_claude_code() -> None:
    permission = {"permissionDecision": "ask", "permissionDecisionReason": "sure?"}
    assert answered("PreToolUse", {"hookSpecificOutput": permission}) == ("ask", "sure?", "")
    assert answered("PreToolUse", {"decision": "approve", "reason": "ok"}) == ("allow", "ok", "")
    assert answered("PreToolUse", {"decision": "block", "reason": "no"}) == ("deny", "no", "")
    stop = {"continue": False, "stopReason": "halt", "decision": "block", "reason": "r"}
    assert answered("PostToolUse", stop) == ("stop", "halt", "")
    assert answered("Stop", {"decision": "block", "reason": "go on"}) == ("block", "go on", "")
    context = {"hookSpecificOutput": {"additionalContext": "ctx"}}
    assert answered("UserPromptSubmit", context) == ("context", "", "ctx")
    assert answered("SessionStart", {"systemMessage": "careful"}) == ("", "careful", "")
    assert answered("Notification", {"decision": "block"}) == ("", "", "")


def test_plain_output_is_context_only_where_claude_code_makes_it_so() -> None:
    assert answer_of(hook("UserPromptSubmit"), ran(0, "Sprint 4\n")).context == "Sprint 4"
    assert answer_of(hook("SessionStart"), ran(0, "{not json")).context == "{not json"
    assert answer_of(hook("PostToolUse"), ran(0, "formatted 1 file\n")).decision == ""
    broken = answer_of(hook("PreToolUse"), ran(0, "{not json"))
    assert broken.decision == "" and broken.note.startswith("its output is not valid JSON")
    quiet = answer_of(hook("PostToolUse"), ran(0, json.dumps({"suppressOutput": True})))
    assert quiet.suppress and quiet.event().hook_run.output == ""


def test_of_several_runs_a_refusal_wins_over_a_question_over_an_allowance() -> None:
    def of(*decisions: str) -> str:
        results = [answer_of(hook("PreToolUse"), ran(0)) for _ in decisions]
        return strongest([replace(a, decision=d) for a, d in zip(results, decisions, strict=True)])

    assert of("allow", "ask") == "ask"
    assert of("allow", "deny", "ask") == "deny"
    assert of("allow", "") == "allow"
    assert of("", "") == ""
    assert of("stop", "deny") == "stop"
