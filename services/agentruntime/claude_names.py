"""The names Claude Code gives the tools that agenthost's tools match, so
files people wrote for it work unchanged: an agent file's `tools` list
(subagents) and a hook's matcher (hooks) name `Read`, `Bash`, `Edit`...
MCP tools are named alike in both (`mcp__<server>__<tool>`). And a call's
arguments as Claude Code names them (a hook reads `tool_input.file_path`,
an absolute path, and `tool_input.command`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# Claude Code's name -> agenthost's tools it stands for.
CLAUDE_TOOLS: dict[str, tuple[str, ...]] = {
    "Read": ("read_file",),
    "Write": ("write_file",),
    "Edit": ("edit_file",),
    "MultiEdit": ("edit_file",),
    "Bash": ("shell",),
    "Grep": ("grep",),
    "Glob": ("glob",),
    "LS": ("list_dir",),
    "Task": ("task",),
    "TodoWrite": ("todo_write",),
    "ExitPlanMode": ("exit_plan_mode",),
}


def claude_name(tool: str) -> str:
    """The name Claude Code calls one of agenthost's tools (its own name
    when Claude Code has none for it, as for MCP tools)."""
    for claude, ours in CLAUDE_TOOLS.items():
        if tool in ours:
            return claude
    return tool


def agenthost_tools(names: Iterable[str]) -> list[str]:
    """agenthost's tools for a list that may use either's names."""
    found: list[str] = []
    for name in names:
        for tool in CLAUDE_TOOLS.get(name, (name,)):
            if tool not in found:
                found.append(tool)
    return found


def claude_names(tool: str) -> list[str]:
    """Every name a matcher may give one of agenthost's tools: Claude
    Code's (`edit_file` is both `Edit` and `MultiEdit`) and its own."""
    return [*(claude for claude, ours in CLAUDE_TOOLS.items() if tool in ours), tool]


# agenthost's tools whose `path` Claude Code calls `file_path`, and those
# that keep the name; both absolute in Claude Code's calls.
FILE_PATH_TOOLS = frozenset({"read_file", "write_file", "edit_file"})
PATH_TOOLS = frozenset({"grep", "glob", "list_dir"})


def claude_input(tool: str, args: Mapping[str, Any], cwd: Path) -> dict[str, Any]:
    """A call's arguments as Claude Code's tool of that name takes them:
    paths absolute (`path` is `file_path` for Read, Write and Edit), a
    command's timeout in milliseconds; the others as they are."""
    given = dict(args)
    path = given.get("path")
    if tool in FILE_PATH_TOOLS | PATH_TOOLS and isinstance(path, str):
        absolute = os.path.normpath(cwd / path)
        if tool in FILE_PATH_TOOLS:
            del given["path"]
            given["file_path"] = absolute
        else:
            given["path"] = absolute
    timeout = given.get("timeout_s")
    if tool == "shell" and isinstance(timeout, int | float):
        del given["timeout_s"]
        given["timeout"] = int(timeout * 1000)
    return given
