"""The names Claude Code gives the tools that agenthost's tools match, so
files people wrote for it work unchanged: an agent file's `tools` list
(subagents) and a hook's matcher (hooks) name `Read`, `Bash`, `Edit`...
MCP tools are named alike in both (`mcp__<server>__<tool>`)."""

from __future__ import annotations

from collections.abc import Iterable

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
