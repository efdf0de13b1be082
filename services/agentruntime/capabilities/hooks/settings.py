"""The hooks a session runs, as its settings files give them, in Claude
Code's format unchanged:

    {"hooks": {"PreToolUse": [{"matcher": "Bash",
                               "hooks": [{"type": "command", "command": "...",
                                          "timeout": 60}]}]}}

Read from the user's config folder's `settings.json`, then the session's
`.agenthost/settings.json`, `.claude/settings.json` and
`.claude/settings.local.json`; every file's hooks run (a command given
twice for one event runs once). A matcher names tools by Claude Code's
names (`Bash`, `Edit|Write`) or agenthost's own, as a list of plain names
(`Edit|Write`: exactly those) or else a regular expression found in the
name (`mcp__memory__.*`); empty or `*` matches every tool. For PreCompact
it matches the trigger (`manual`, `auto`), for SessionStart the source,
for SessionEnd the reason, for Notification the notification's type; the
other events have none. An entry that cannot be used (an unknown event, a
hook that is no command, a matcher that is no regular expression) is a
problem `/hooks` lists, never a crash.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...settings_files import CLAUDE_SETTINGS, SETTINGS_FILE, WORKSPACE_SETTINGS, read_settings

EVENTS = (
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "SessionStart",
    "SessionEnd",
    "Notification",
)
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 600.0
# A matcher of plain names only: each matches one name exactly.
_PLAIN = re.compile(r"[A-Za-z0-9_|]+")


@dataclass(frozen=True)
class Hook:
    event: str
    # "" matches everything.
    matcher: str
    command: str
    timeout_s: float
    # The settings file it is configured in.
    source: str

    def matches(self, names: Sequence[str]) -> bool:
        """Whether the matcher takes one of `names` (a tool's names, a trigger)."""
        if self.matcher in ("", "*") or not names:
            return True
        if _PLAIN.fullmatch(self.matcher):
            return any(name in self.matcher.split("|") for name in names)
        pattern = re.compile(self.matcher)  # checked when it was read
        return any(pattern.search(name) for name in names)


@dataclass(frozen=True)
class HookSettings:
    hooks: tuple[Hook, ...] = ()
    problems: tuple[str, ...] = ()

    def of(self, event: str, names: Sequence[str] = ()) -> list[Hook]:
        """The hooks `event` runs for `names`, each command once."""
        chosen: dict[str, Hook] = {}
        for hook in self.hooks:
            if hook.event == event and hook.matches(names):
                chosen.setdefault(hook.command, hook)
        return list(chosen.values())


def settings_files(cwd: Path, config_dir: Path) -> list[Path]:
    """Where hooks are read from, in order."""
    return [
        config_dir / SETTINGS_FILE,
        cwd / WORKSPACE_SETTINGS,
        *(cwd / name for name in CLAUDE_SETTINGS),
    ]


def load_hooks(cwd: Path, config_dir: Path) -> HookSettings:
    hooks: list[Hook] = []
    problems: list[str] = []
    for path in settings_files(cwd, config_dir):
        read = read_settings(path)
        if read.problem is not None:
            problems.append(read.problem)
        if read.data is not None and "hooks" in read.data:
            found, wrong = parse_hooks(str(path), read.data["hooks"])
            hooks += found
            problems += wrong
    return HookSettings(tuple(hooks), tuple(problems))


def parse_hooks(source: str, given: Any) -> tuple[list[Hook], list[str]]:
    """The hooks of one file's `hooks` value, and what is wrong in it."""
    if not isinstance(given, Mapping):
        return [], [f"{source}: hooks is not an object; ignored"]
    hooks: list[Hook] = []
    problems: list[str] = []
    for event, groups in given.items():
        where = f"{source}: hooks.{event}"
        if event not in EVENTS:
            problems.append(f"{where}: not an event agenthost runs hooks for; ignored")
        elif not isinstance(groups, list):
            problems.append(f"{where}: is not a list; ignored")
        else:
            for number, group in enumerate(groups):
                found, wrong = _group(event, source, f"{where}[{number}]", group)
                hooks += found
                problems += wrong
    return hooks, problems


def _group(event: str, source: str, where: str, group: Any) -> tuple[list[Hook], list[str]]:
    """One {matcher, hooks} entry."""
    if not isinstance(group, Mapping) or not isinstance(group.get("hooks"), list):
        return [], [f"{where}: is not an object with a hooks list; ignored"]
    matcher = group.get("matcher", "")
    if not isinstance(matcher, str):
        return [], [f"{where}: matcher is not a string; ignored"]
    if not _PLAIN.fullmatch(matcher) and matcher not in ("", "*"):
        try:
            re.compile(matcher)
        except re.error as error:
            return [], [f"{where}: matcher {matcher!r} is not a regular expression ({error})"]
    hooks: list[Hook] = []
    problems: list[str] = []
    for number, entry in enumerate(group["hooks"]):
        hook = _hook(event, matcher, source, entry)
        if isinstance(hook, Hook):
            hooks.append(hook)
        else:
            problems.append(f"{where}.hooks[{number}]: {hook}; ignored")
    return hooks, problems


def _hook(event: str, matcher: str, source: str, entry: Any) -> Hook | str:
    """One hook, or what is wrong with it."""
    if not isinstance(entry, Mapping):
        return "is not an object"
    kind = entry.get("type", "command")
    if kind != "command":
        return f"type {kind!r}: only command hooks run here"
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        return "has no command"
    timeout = entry.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        return f"timeout {timeout!r} is not a number of seconds"
    return Hook(event, matcher, command, min(float(timeout), MAX_TIMEOUT_S), source)


def described(settings: HookSettings) -> Iterable[str]:
    """The hooks and problems, a line each (/hooks)."""
    for hook in settings.hooks:
        matcher = f" [{hook.matcher}]" if hook.matcher else ""
        yield f"{hook.event}{matcher}: {hook.command}  ({hook.source}, {hook.timeout_s:g} s)"
    for problem in settings.problems:
        yield f"cannot use: {problem}"
