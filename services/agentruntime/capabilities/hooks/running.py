"""Running a hook, and what its answer means, as in Claude Code.

A hook is a command of its session: it runs in the session's folder under
the session's sandbox, hidden paths, network setting and process limit
(confinement.py, through shell.run_shell), so it may refuse or ask but
never reach what the session's own commands could not. It reads the event
as JSON on stdin; `CLAUDE_PROJECT_DIR` names the session's folder. It is
cut at its timeout (its own, else 60 s), with everything it started.

Its answer:
  - exit code 0: its stdout, when it is a JSON object, is its decision
    (`decision`, `reason`, `continue` with `stopReason`, `suppressOutput`,
    `systemMessage`, `hookSpecificOutput` with `permissionDecision` and
    `permissionDecisionReason` or `additionalContext`); otherwise, for
    UserPromptSubmit and SessionStart, it is context for the model;
  - exit code 2: it blocks, with its stderr as the reason, where the event
    can be blocked (a tool call, a prompt, the turn's end, a tool's result
    sent back to the model); elsewhere its stderr is only noted;
  - any other code, a timeout, no confinement, JSON that is not valid: a
    note on its run, and the session goes on as if it had said nothing.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev

from services.common.status import clip

from ...confinement import Jail, confined
from ...mcp.launch import own_folders_in_tmp
from ...shell import ShellResult, run_shell, shell_environment
from .settings import Hook

OUTPUT_CAP = 64 * 1024
SHOWN_BYTES = 16384
PROJECT_DIR_ENV = "CLAUDE_PROJECT_DIR"
BLOCKING_EVENTS = frozenset(
    {"PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop"}
)
# Where plain stdout of a hook that exited 0 is context for the model.
CONTEXT_EVENTS = frozenset({"UserPromptSubmit", "SessionStart"})
PERMISSION_DECISIONS = frozenset({"allow", "deny", "ask"})
# Claude Code's older PreToolUse decisions.
LEGACY_DECISIONS = {"approve": "allow", "block": "deny"}
# Which of several runs' decisions counts, the first first.
PRECEDENCE = ("stop", "deny", "block", "ask", "allow", "context", "")
NO_REASON = "(the hook gave no reason)"


@dataclass(frozen=True)
class Where:
    """What the session's commands may reach."""

    cwd: Path
    sandbox: str
    network: bool
    hidden: tuple[Path, ...]


@dataclass(frozen=True)
class Answer:
    """One run of a hook, and what it decided (see the module docstring)."""

    hook: Hook
    result: ShellResult
    # "", "allow", "deny", "ask", "block", "stop", "context".
    decision: str = ""
    # Why (for the model when it blocks, for the user otherwise).
    reason: str = ""
    # Context for the model (additionalContext, or a context event's stdout).
    context: str = ""
    note: str = ""
    suppress: bool = False

    def event(self, call_id: str = "", note: str = "") -> ev.Event:
        """The hook/run recorded for it (`note`: what the runtime adds)."""
        result = self.result
        run = ev.HookRun(
            event=self.hook.event,
            command=clip(self.hook.command, 4096),
            source=self.hook.source[:4096],
            call_id=call_id[:128],
            decision=self.decision,
            reason=clip(self.reason, SHOWN_BYTES),
            note=clip("; ".join(n for n in (self.note, note) if n), 4096),
            duration_ms=int(result.duration_s * 1000),
            output="" if self.suppress else clip(result.output, SHOWN_BYTES),
            errors=clip(result.errors, SHOWN_BYTES),
            timed_out=result.timed_out,
        )
        if result.exit_code is not None and not result.refused:
            run.exit_code = result.exit_code
        return ev.Event(hook_run=run)


async def run_hook(hook: Hook, payload: dict[str, Any], where: Where) -> Answer:
    """Run `hook` confined as a command of its session, given `payload`."""
    jail = None
    if confined(where.sandbox):
        try:
            shown = own_folders_in_tmp(shlex.split(hook.command))
        except ValueError:  # unbalanced quotes: the shell will say so
            shown = ()
        jail = Jail(where.sandbox, where.cwd, where.network, where.hidden, shown=shown)
    result = await run_shell(
        hook.command,
        where.cwd,
        timeout_s=hook.timeout_s,
        output_cap=OUTPUT_CAP,
        env=shell_environment() | {PROJECT_DIR_ENV: str(where.cwd)},
        jail=jail,
        stdin=json.dumps(payload, ensure_ascii=False).encode(),
        errors_apart=True,
    )
    return answer_of(hook, result)


def answer_of(hook: Hook, result: ShellResult) -> Answer:
    """What a finished run of `hook` decided."""
    if result.refused:
        return Answer(hook, result, note=result.refused)
    if result.timed_out:
        return Answer(hook, result, note=f"timed out after {hook.timeout_s:g} s and was stopped")
    errors = result.errors.strip()
    if result.exit_code == 2:
        if hook.event not in BLOCKING_EVENTS:
            return Answer(hook, result, note=f"exit 2: {errors or NO_REASON}")
        blocked = "deny" if hook.event == "PreToolUse" else "block"
        return Answer(hook, result, blocked, errors or NO_REASON)
    if result.exit_code != 0:
        said = f": {errors.splitlines()[0]}" if errors else ""
        return Answer(hook, result, note=f"exit {result.exit_code} (a non-blocking error){said}")
    return _exit_zero(hook, result)


def _exit_zero(hook: Hook, result: ShellResult) -> Answer:
    said = result.output.strip()
    try:
        given = json.loads(said) if said.startswith("{") else None
    except json.JSONDecodeError as error:
        if hook.event in CONTEXT_EVENTS:
            return Answer(hook, result, "context", context=said)
        return Answer(hook, result, note=f"its output is not valid JSON ({error})")
    if not isinstance(given, dict):
        if hook.event in CONTEXT_EVENTS and said:
            return Answer(hook, result, "context", context=said)
        return Answer(hook, result)
    return _json_answer(hook, result, given)


def _json_answer(hook: Hook, result: ShellResult, given: dict[str, Any]) -> Answer:
    specific = given.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    decision, reason = "", _text(given.get("reason"))
    context = _text(specific.get("additionalContext"))
    if hook.event == "PreToolUse":
        wanted = specific.get("permissionDecision")
        if wanted in PERMISSION_DECISIONS:
            decision, reason = str(wanted), _text(specific.get("permissionDecisionReason"))
        elif given.get("decision") in LEGACY_DECISIONS:
            decision = LEGACY_DECISIONS[str(given["decision"])]
    elif given.get("decision") == "block" and hook.event in BLOCKING_EVENTS:
        decision = "block"
        reason = reason or NO_REASON
    if given.get("continue") is False:
        decision, reason = "stop", _text(given.get("stopReason")) or reason
    if not decision and context:
        decision = "context"
    reason = reason or _text(given.get("systemMessage"))
    suppress = given.get("suppressOutput") is True
    return Answer(hook, result, decision, reason, context, suppress=suppress)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def strongest(answers: list[Answer]) -> str:
    """The decision that counts among several runs' (PRECEDENCE)."""
    decisions = {answer.decision for answer in answers}
    return next(d for d in PRECEDENCE if d in decisions or not d)


def reasons(answers: list[Answer], *decisions: str) -> str:
    """The reasons of the runs that decided one of `decisions`, a paragraph each."""
    return "\n\n".join(a.reason for a in answers if a.decision in decisions and a.reason)
