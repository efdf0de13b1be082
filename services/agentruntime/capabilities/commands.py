"""Custom slash commands: prompts kept in Markdown files, written as Claude
Code users write them (`.claude/commands/review.md` is `/review`).

A session's command files are the `*.md` files under, in this order (the
first of a name wins; a later one is a problem):

  - `<session folder>/.agenthost/commands/`
  - `<session folder>/.claude/commands/`
  - `<project root>/.claude/commands/` (the git root above the session's
    folder, as instructions.py finds it)
  - `commands/` of the user's agenthost config folder.

A file's stem is the command's name, which must be one a command may have
(lowercase letters, digits, `-` and `_`, a letter first); a name the
runtime's own commands hold is theirs. An optional YAML front matter gives
its `description` (else its first line says it) and `argument-hint`; its
body is the prompt, where `$ARGUMENTS` is what follows the command and `$1`,
`$2`, ... its words (arguments given to a body that names none are added
after it, as Claude Code does). Running one records command/run (with the
file's path and digest) and sends the expanded body as the user's prompt,
queued while a turn runs. `/commands` lists the files and the problems of
those not offered. A file in a hidden path is never read.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import re
import shlex
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agenthost.sessionlog.v1 import events_pb2 as ev

from services.common.errors import DomainError, LeaseLost

from ..capability import (
    AgentHandle,
    Capability,
    Command,
    CommandResult,
    PromptMode,
    SessionPart,
    SessionScope,
)
from . import front_matter
from .front_matter import FrontMatterError
from .instructions import GLOBAL, PROJECT, is_hidden, project_root

NAME = "commands"
SUFFIX = ".md"
# runtime.proto's ExecuteCommandRequest.name.
COMMAND_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_ARGUMENT = re.compile(r"\$(ARGUMENTS|[1-9][0-9]*)")
MAX_DESCRIPTION_CHARS = 120
# What a prompt may hold (runtime.proto's PromptRequest.text).
MAX_PROMPT_BYTES = 262144
MAX_FILES = 500


@dataclass(frozen=True)
class CommandFile:
    name: str
    description: str
    hint: str
    # As the user knows it: relative to the session's folder when inside it.
    path: str
    # Where it was found, and the folder of commands it is in.
    found: Path
    place: Path
    scope: str
    digest: str
    bytes: int
    body: str

    @property
    def usage(self) -> str:
        if self.hint:
            return f"/{self.name} {self.hint}"
        return f"/{self.name} [arguments]" if _ARGUMENT.search(self.body) else f"/{self.name}"

    def source(self) -> ev.ContextSource:
        return ev.ContextSource(
            path=self.path, digest=self.digest, bytes=self.bytes, scope=self.scope
        )


@dataclass(frozen=True)
class Problem:
    path: str
    reason: str


@dataclass(frozen=True)
class Found:
    files: tuple[CommandFile, ...] = ()
    problems: tuple[Problem, ...] = ()


# -- finding them --------------------------------------------------------------------------


def places(cwd: Path, config_dir: Path) -> list[tuple[Path, str]]:
    found = [
        (cwd / ".agenthost" / "commands", PROJECT),
        (cwd / ".claude" / "commands", PROJECT),
    ]
    root = project_root(cwd)
    if root != cwd:
        found.append((root / ".claude" / "commands", PROJECT))
    found.append((config_dir / "commands", GLOBAL))
    return found


def candidates(cwd: Path, config_dir: Path) -> list[tuple[Path, Path, str]]:
    """(file, its place, scope) of every `*.md` under the places, sorted;
    folders (Claude Code's namespaces) included, hidden ones not."""
    found: list[tuple[Path, Path, str]] = []
    for place, scope in places(cwd, config_dir):
        for folder, subfolders, names in os.walk(place):
            subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
            found += [
                (Path(folder, name), place, scope)
                for name in sorted(names)
                if name.endswith(SUFFIX) and not name.startswith(".")
            ]
            if len(found) >= MAX_FILES:
                return found[:MAX_FILES]
    return found


def read_command(
    path: Path, place: Path, scope: str, cwd: Path, hidden: Sequence[Path]
) -> CommandFile:
    """The command of a file; a FrontMatterError says why it is not one."""
    name = path.name.removesuffix(SUFFIX)
    if not COMMAND_NAME.fullmatch(name):
        raise FrontMatterError(
            f"{name!r} is not a command name (lowercase letters, digits, - and _, "
            "a letter first, at most 64)"
        )
    real = Path(os.path.realpath(path))
    if is_hidden(real, Path(os.path.realpath(cwd)), hidden):
        raise FrontMatterError("the file is hidden from the agent")
    text, data = front_matter.read_text(real)
    document = front_matter.parse(text)
    description = front_matter.text_field(document.fields, "description", required=False)
    hint = front_matter.text_field(document.fields, "argument-hint", required=False)
    body = document.body.strip()
    if not body:
        raise FrontMatterError("the file has no prompt (its body is empty)")
    namespace = path.parent.relative_to(place).as_posix()
    where = scope if namespace == "." else f"{scope}:{namespace}"
    summary = " ".join((description or _first_line(body)).split())
    if len(summary) > MAX_DESCRIPTION_CHARS:
        summary = summary[: MAX_DESCRIPTION_CHARS - 1] + "…"
    return CommandFile(
        name=name,
        description=f"{summary} ({where})",
        hint=" ".join(hint.split()),
        path=shown_path(path, cwd),
        found=path,
        place=place,
        scope=scope,
        digest="sha256:" + hashlib.sha256(data).hexdigest(),
        bytes=len(data),
        body=body,
    )


def shown_path(path: Path, cwd: Path) -> str:
    """A file as its user knows it: relative to the session's folder when
    found in it, else absolute."""
    return path.relative_to(cwd).as_posix() if path.is_relative_to(cwd) else str(path)


def _first_line(body: str) -> str:
    line = next(line for line in body.splitlines() if line.strip())
    return line.strip().lstrip("#").strip()


def read_all(
    found: Sequence[tuple[Path, Path, str]],
    cwd: Path,
    hidden: Sequence[Path],
    taken: frozenset[str],
) -> Found:
    files: dict[str, CommandFile] = {}
    problems = []
    for path, place, scope in found:
        where = shown_path(path, cwd)
        try:
            file = read_command(path, place, scope, cwd, hidden)
        except FrontMatterError as error:
            problems.append(Problem(where, str(error)))
            continue
        first = files.get(file.name)
        if file.name in taken:
            problems.append(Problem(where, f"/{file.name} is a built-in command, which wins"))
        elif first is not None:
            problems.append(Problem(where, f"/{file.name} is taken by {first.path}"))
        else:
            files[file.name] = file
    return Found(tuple(files.values()), tuple(problems))


async def discover(scope: SessionScope, taken: frozenset[str]) -> Found:
    there = await asyncio.to_thread(candidates, scope.cwd, scope.config_dir)
    # What is hidden is asked only when there is a file to check against it.
    hidden = await scope.hidden() if there else ()
    return await asyncio.to_thread(read_all, there, scope.cwd, hidden, taken)


# -- running one ------------------------------------------------------------------------------


def expand(body: str, args: str | None) -> str:
    """The prompt a command's body makes with the arguments given."""
    given = (args or "").strip()
    try:
        words = shlex.split(given)
    except ValueError:  # an unclosed quote: the words as typed
        words = given.split()
    named = False

    def argument(match: re.Match[str]) -> str:
        nonlocal named
        named = True
        if match.group(1) == "ARGUMENTS":
            return given
        index = int(match.group(1)) - 1
        return words[index] if index < len(words) else ""

    text = _ARGUMENT.sub(argument, body).strip()
    if given and not named:
        text += f"\n\nARGUMENTS: {given}"
    return text


async def run_command(
    file: CommandFile, scope: SessionScope, agent: AgentHandle, args: str | None
) -> CommandResult:
    """Record command/run, then send the prompt the file (as it is now) makes."""
    hidden = await scope.hidden()
    try:
        now = await asyncio.to_thread(
            read_command, file.found, file.place, file.scope, scope.cwd, hidden
        )
    except FrontMatterError as error:
        message = f"/{file.name} cannot run: {file.path}: {error}"
        return CommandResult(False, message, agent.state.last_seq)
    prompt = expand(now.body, args)
    if len(prompt.encode()) > MAX_PROMPT_BYTES:
        message = f"/{file.name} makes a prompt over {MAX_PROMPT_BYTES} bytes: not sent"
        return CommandResult(False, message, agent.state.last_seq)
    command_id = f"cmd-{uuid.uuid4().hex}"
    run = ev.CommandRun(command_id=command_id, name=file.name, source=now.source())
    if args is not None:
        run.args = args
    await agent.record([ev.Event(id=command_id, command_run=run)])
    try:
        mode = await agent.prompt(prompt, PromptMode.QUEUE)
    except LeaseLost:
        raise  # the session runs elsewhere now: nothing more is recorded here
    except DomainError as error:  # the prompt was refused (its typed error says why)
        kind = ev.COMMAND_DONE_KIND_ERROR
        done = ev.CommandDone(command_id=command_id, kind=kind, message=error.message)
        await agent.record([ev.Event(id=f"{command_id}-done", command_done=done)])
        raise
    queued = "" if mode is PromptMode.SEND else f"/{file.name} is queued until the turn ends."
    return CommandResult(True, queued, agent.state.last_seq)


# -- the session's part ------------------------------------------------------------------------


class CommandsPart(SessionPart):
    def __init__(self, scope: SessionScope) -> None:
        self.scope = scope

    async def commands(self, taken: frozenset[str]) -> Sequence[Command]:
        taken |= {NAME}
        found = await discover(self.scope, taken)
        listing = Command(
            NAME,
            "List the custom commands (prompt files), where each is, and what is wrong "
            "with those not offered.",
            "/commands",
            functools.partial(self._show, taken),
        )
        return [listing, *(self._command(file) for file in found.files)]

    def _command(self, file: CommandFile) -> Command:
        run = functools.partial(run_command, file, self.scope)
        return Command(file.name, file.description, file.usage, run)

    async def _show(
        self, taken: frozenset[str], agent: AgentHandle, args: str | None
    ) -> CommandResult:
        found = await discover(self.scope, taken)
        width = max((len(f.usage) for f in found.files), default=0)
        lines = [f"{f.usage:<{width}}  {f.path}" for f in found.files]
        if not found.files:
            where = ", ".join(str(p) for p, _ in places(self.scope.cwd, self.scope.config_dir))
            lines.append(f"No custom commands (*.md files) in {where}.")
        if found.problems:
            lines.append("Not offered:")
            lines += [f"  {p.path}: {p.reason}" for p in found.problems]
        return CommandResult(True, "\n".join(lines), agent.state.last_seq)


class Commands(Capability):
    name = NAME

    def session(self, scope: SessionScope) -> SessionPart:
        return CommandsPart(scope)
