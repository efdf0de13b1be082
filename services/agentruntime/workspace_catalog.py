"""The workspace tools a model is offered in every mode: read_file, list_dir,
glob, grep, write_file, edit_file and shell, over the session's folder.

Each wraps workspace_tools.py / shell.py with what the runtime needs around
it: its effect (what the sandbox and the approval policy judge), what an
approval question shows and what "allow for this session" grants (every
file change, or one exact command), and the one-line summary and diff a
client shows of the call.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agenthost_core.folds import Approval

from . import gates
from . import workspace_tools as wt
from .gates import Effect
from .shell import (
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    SHELL_DESCRIPTION,
    SHELL_PARAMETERS,
    format_shell_result,
    jail_for,
    run_shell,
)
from .tools import Args, Tool, ToolContext, ToolDisplay, ToolOutcome

# What "allow for this session" grants for a file change: every file change.
EDIT_GRANT = "edit"


def files_of(
    cwd: Path, sandbox: str, hidden: Sequence[Path], readable: Sequence[Path] = ()
) -> wt.WorkspaceFiles:
    """The file tools see what confined commands see: the folder minus what
    is hidden from them (confinement.Jail.hidden); a full sandbox, anywhere.
    They may also read the folders `readable` names (a skill's, outside it)."""
    confined = gates.confines_paths(sandbox)
    return wt.WorkspaceFiles(cwd, confined=confined, hidden=hidden, readable=readable)


def _files(context: ToolContext) -> wt.WorkspaceFiles:
    return files_of(context.cwd, context.sandbox, context.hidden, context.readable)


def _text(args: Args, name: str, default: str = "") -> Any:
    return args.get(name, default)


def _shown(outcome: ToolOutcome, summary: str) -> ToolOutcome:
    return ToolOutcome(outcome.ok, outcome.output, outcome.error, ToolDisplay(summary=summary))


# -- reads ------------------------------------------------------------------------------


async def _read_file(context: ToolContext, args: Args) -> ToolOutcome:
    outcome = await _files(context).read_file(
        _text(args, "path"), args.get("offset"), args.get("limit")
    )
    return _shown(outcome, read_summary(args))


def read_summary(args: Args) -> str:
    path, offset, limit = args.get("path", ""), args.get("offset"), args.get("limit")
    if isinstance(offset, int) and isinstance(limit, int):
        return f"read {path}:{offset}-{offset + limit - 1}"
    if isinstance(offset, int):
        return f"read {path}:{offset}-"
    if isinstance(limit, int):
        return f"read {path}:1-{limit}"
    return f"read {path}"


async def _list_dir(context: ToolContext, args: Args) -> ToolOutcome:
    path = _text(args, "path", ".")
    return _shown(await _files(context).list_dir(path), f"list {path}")


async def _glob(context: ToolContext, args: Args) -> ToolOutcome:
    pattern, path = _text(args, "pattern"), _text(args, "path", ".")
    return _shown(await _files(context).glob(pattern, path), f"glob {pattern}")


async def _grep(context: ToolContext, args: Args) -> ToolOutcome:
    pattern, path = _text(args, "pattern"), _text(args, "path", ".")
    outcome = await _files(context).grep(
        pattern,
        path,
        args.get("glob"),
        bool(args.get("ignore_case", False)),
        args.get("max_results"),
    )
    where = "" if path == "." else f" in {path}"
    return _shown(outcome, f"grep {pattern!r}{where}")


# -- file changes -------------------------------------------------------------------------


def _edit_shown(edit: wt.FileEdit, verb: str, path: object) -> ToolOutcome:
    outcome, change = edit.outcome, edit.change
    if change is None:
        return _shown(outcome, f"{verb} {path}")
    display = ToolDisplay(
        summary=f"{verb} {change.path} (+{change.added} -{change.removed})",
        diff=change.diff,
        lines_added=change.added,
        lines_removed=change.removed,
    )
    return ToolOutcome(outcome.ok, outcome.output, outcome.error, display)


async def _write_file(context: ToolContext, args: Args) -> ToolOutcome:
    path = _text(args, "path")
    edit = await _files(context).write_file(path, _text(args, "content"))
    return _edit_shown(edit, "write", path)


async def _edit_file(context: ToolContext, args: Args) -> ToolOutcome:
    path = _text(args, "path")
    edit = await _files(context).edit_file(
        path,
        _text(args, "old_string"),
        _text(args, "new_string"),
        bool(args.get("replace_all", False)),
    )
    return _edit_shown(edit, "edit", path)


def _write_approval(args: Args) -> Approval:
    path, content = str(args.get("path", "")), str(args.get("content", ""))
    return Approval("write_file", f"write {path}", content, EDIT_GRANT)


def _edit_approval(args: Args) -> Approval:
    path = str(args.get("path", ""))
    old, new = str(args.get("old_string", "")), str(args.get("new_string", ""))
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), path, path, lineterm="")
    return Approval("edit_file", f"edit {path}", "\n".join(diff), EDIT_GRANT)


# An approval shows the diff the call would make to the file as it is now:
# three lines of context, true line numbers; a new file's first lines. When
# the call would fail (no such text, not a file) it is described from its
# arguments alone, and running it reports why.
NEW_FILE_LINES_SHOWN = 40


def _approval_of(change: wt.FileChange | None, fallback: Approval) -> Approval:
    if change is None:
        return fallback
    detail = change.diff
    if change.created:
        detail = _first_lines(detail, NEW_FILE_LINES_SHOWN + 3)  # + the diff's 3 header lines
    return Approval(fallback.tool, fallback.summary, detail, EDIT_GRANT)


def _first_lines(text: str, count: int) -> str:
    lines = text.splitlines(keepends=True)
    if len(lines) <= count:
        return text
    return "".join(lines[:count]) + f"… {len(lines) - count} more lines\n"


async def _write_preview(context: ToolContext, args: Args) -> Approval:
    path, content = args.get("path"), args.get("content")
    fallback = _write_approval(args)
    if not isinstance(path, str) or not isinstance(content, str):
        return fallback
    change = await _files(context).preview_write(path, content)
    return _approval_of(change, fallback)


async def _edit_preview(context: ToolContext, args: Args) -> Approval:
    path, old, new = args.get("path"), args.get("old_string"), args.get("new_string")
    fallback = _edit_approval(args)
    if not isinstance(path, str) or not isinstance(old, str) or not isinstance(new, str):
        return fallback
    every = bool(args.get("replace_all", False))
    change = await _files(context).preview_edit(path, old, new, every)
    return _approval_of(change, fallback)


# -- commands -------------------------------------------------------------------------------


async def _shell(context: ToolContext, args: Args) -> ToolOutcome:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return ToolOutcome(ok=False, error="command must be a non-empty string")
    if args.get("background") is True:
        # The jobs capability runs these (capabilities/jobs/); a runtime without it cannot.
        return ToolOutcome(ok=False, error="background jobs are not available here")
    timeout = args.get("timeout_s", DEFAULT_TIMEOUT_S)
    if not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_S:
        return ToolOutcome(ok=False, error=f"timeout_s must be a number in (0, {MAX_TIMEOUT_S:g}]")
    result = await run_shell(
        command,
        context.cwd,
        timeout_s=float(timeout),
        on_output=context.on_output,
        jail=jail_for(context),
    )
    outcome = format_shell_result(command, result)
    ending = (
        "not run: cannot be confined"
        if result.refused
        else "timed out"
        if result.timed_out
        else f"exit {result.exit_code}"
    )
    display = ToolDisplay(summary=f"$ {command} ({ending})", exit_code=result.exit_code)
    return ToolOutcome(outcome.ok, outcome.output, outcome.error, display)


def shell_approval(args: Args) -> Approval:
    """One exact command; the same grant whether it runs now or in the background."""
    command = str(args.get("command", ""))
    shown = f"$ {command} (in the background)" if args.get("background") is True else f"$ {command}"
    return Approval("shell", shown, command, f"shell:{command}")


def workspace_tools() -> list[Tool]:
    """The workspace tools, in the order the model is offered them."""
    return [
        Tool(
            "read_file", wt.READ_FILE_DESCRIPTION, wt.READ_FILE_PARAMETERS, _read_file, Effect.READ
        ),
        Tool("list_dir", wt.LIST_DIR_DESCRIPTION, wt.LIST_DIR_PARAMETERS, _list_dir, Effect.READ),
        Tool("glob", wt.GLOB_DESCRIPTION, wt.GLOB_PARAMETERS, _glob, Effect.READ),
        Tool("grep", wt.GREP_DESCRIPTION, wt.GREP_PARAMETERS, _grep, Effect.READ),
        Tool(
            "write_file",
            wt.WRITE_FILE_DESCRIPTION,
            wt.WRITE_FILE_PARAMETERS,
            _write_file,
            Effect.WRITE,
            describe=_write_approval,
            preview=_write_preview,
        ),
        Tool(
            "edit_file",
            wt.EDIT_FILE_DESCRIPTION,
            wt.EDIT_FILE_PARAMETERS,
            _edit_file,
            Effect.WRITE,
            describe=_edit_approval,
            preview=_edit_preview,
        ),
        Tool("shell", SHELL_DESCRIPTION, SHELL_PARAMETERS, _shell, Effect.COMMAND, shell_approval),
    ]
