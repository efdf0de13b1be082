"""Skills: folders of instructions and files for a kind of task, written as
Claude Code and others write them (a folder holding SKILL.md, whose YAML
front matter gives the skill's `name` and `description`), whose body the
model loads only when a task calls for it.

A session's skills are the folders of, in this order (the first of a name
wins; a later one is a problem):

  - `<session folder>/.agenthost/skills/`
  - `<session folder>/.claude/skills/`
  - `<project root>/.claude/skills/` (the git root above the session's
    folder, as instructions.py finds it)
  - `skills/` of the user's agenthost config folder.

Before each model request the catalog (each skill's name and description)
is brought in line with what is on disk: sent before the first request,
and again, whole, when it changed, as a context/added event, so the view
is rebuilt from the log; a compaction carries it (`carried`). The `skill`
tool returns a skill's body (SKILL.md after its front matter) and lists
the files of its folder by paths read_file accepts; the folders of the
skills in the catalog that lie outside the session's folder may be read by
the file tools (`readable`), never written. Loading is the tool's call and
result in the log. A SKILL.md that cannot be read (bad YAML, no name or
description, a name taken) is left out of the catalog and listed with its
problem by `/skills`; a folder in a hidden path is never read.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agenthost.sessionlog.v1 import events_pb2 as ev

from ..capability import AgentHandle, Capability, Command, CommandResult, SessionPart, SessionScope
from ..gates import Effect
from ..tools import Args, Tool, ToolContext, ToolDisplay, ToolOutcome
from . import front_matter
from .front_matter import FrontMatterError
from .instructions import GLOBAL, PROJECT, is_hidden, project_root

NAME = "skills"
TOOL = "skill"
SKILL_FILE = "SKILL.md"
# The catalog's size; skills past it (or past the sources a context/added
# may name) are named, not described, the first of them.
BUDGET_BYTES = 16 * 1024
MAX_DESCRIBED = 256
MAX_NAMED = 50
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
# Files of a skill's folder the tool lists.
MAX_LISTED_FILES = 200

HEADING = (
    "Skills you can load: each is a folder of instructions and files for one kind of "
    f"task. When a task matches a skill's description, call the `{TOOL}` tool with its "
    "name before you start; it returns the skill's instructions and lists its files."
)
CHANGED_HEADING = "The skills you can load changed; this list replaces the one before:"
NONE_LEFT = "No skills are available any more: the ones listed before were removed."
LEFT_OUT_LINE = "Not described here, over the {budget}-byte budget (load them by name): {names}."
_CATALOG = re.compile(r"<skills>\n.*</skills>", re.DOTALL)

TOOL_DESCRIPTION = (
    "Load a skill from the skills list you were given: returns its instructions (its "
    "SKILL.md) and the files of its folder, which read_file reads by the paths given. "
    "Follow the instructions for the task at hand."
)
TOOL_PARAMETERS = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "The skill's name, as listed."}},
    "required": ["name"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    # The SKILL.md as the model is told it: relative to the session's folder
    # when it lies inside it, else its real, absolute path.
    path: str
    # The folder's real path.
    folder: Path
    scope: str
    digest: str
    bytes: int
    body: str


@dataclass(frozen=True)
class Problem:
    path: str
    reason: str


@dataclass(frozen=True)
class Found:
    skills: tuple[Skill, ...] = ()
    problems: tuple[Problem, ...] = ()

    def named(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)


# -- finding them ------------------------------------------------------------------------


def places(cwd: Path, config_dir: Path) -> list[tuple[Path, str]]:
    """The skill folders' parents, in the order a name is first taken."""
    found = [(cwd / ".agenthost" / "skills", PROJECT), (cwd / ".claude" / "skills", PROJECT)]
    root = project_root(cwd)
    if root != cwd:
        found.append((root / ".claude" / "skills", PROJECT))
    found.append((config_dir / "skills", GLOBAL))
    return found


def candidates(cwd: Path, config_dir: Path) -> list[tuple[Path, str]]:
    """Every (folder, scope) holding a SKILL.md, sorted by name in each place."""
    found = []
    for parent, scope in places(cwd, config_dir):
        try:
            entries = sorted(os.scandir(parent), key=lambda entry: entry.name)
        except OSError:
            continue
        found += [
            (Path(entry.path), scope)
            for entry in entries
            if (Path(entry.path) / SKILL_FILE).is_file()
        ]
    return found


def shown_path(path: Path, cwd: Path) -> str:
    """A path as the model gives it to read_file: relative to the session's
    folder when inside it (by its real path too), else real and absolute."""
    if path.is_relative_to(cwd):
        real = Path(os.path.realpath(path))
        if real.is_relative_to(os.path.realpath(cwd)):
            return path.relative_to(cwd).as_posix()
    return os.path.realpath(path)


def read_skill(folder: Path, scope: str, cwd: Path, hidden: Sequence[Path]) -> Skill:
    """The skill of `folder`; a FrontMatterError says why it is not one."""
    real = Path(os.path.realpath(folder))
    if is_hidden(real, Path(os.path.realpath(cwd)), hidden):
        raise FrontMatterError("the folder is hidden from the agent")
    text, data = front_matter.read_text(real / SKILL_FILE)
    document = front_matter.parse(text)
    name = front_matter.text_field(document.fields, "name", required=True)
    description = front_matter.text_field(document.fields, "description", required=True)
    if len(name) > MAX_NAME_CHARS or any(c.isspace() or not c.isprintable() for c in name):
        raise FrontMatterError(
            f"the name {name!r} is not a skill name "
            f"(no spaces, at most {MAX_NAME_CHARS} characters)"
        )
    return Skill(
        name=name,
        description=" ".join(description.split()),
        path=shown_path(folder / SKILL_FILE, cwd),
        folder=real,
        scope=scope,
        digest="sha256:" + hashlib.sha256(data).hexdigest(),
        bytes=len(data),
        body=document.body.strip(),
    )


def read_all(found: Sequence[tuple[Path, str]], cwd: Path, hidden: Sequence[Path]) -> Found:
    skills: dict[str, Skill] = {}
    problems = []
    for folder, scope in found:
        where = shown_path(folder / SKILL_FILE, cwd)
        try:
            skill = read_skill(folder, scope, cwd, hidden)
        except FrontMatterError as error:
            problems.append(Problem(where, str(error)))
            continue
        first = skills.get(skill.name)
        if first is not None:
            problems.append(Problem(where, f"the name {skill.name!r} is taken by {first.path}"))
            continue
        skills[skill.name] = skill
    return Found(tuple(skills.values()), tuple(problems))


async def discover(scope: SessionScope) -> Found:
    there = await asyncio.to_thread(candidates, scope.cwd, scope.config_dir)
    # What is hidden is asked only when there is a folder to check against it.
    hidden = await scope.hidden() if there else ()
    return await asyncio.to_thread(read_all, there, scope.cwd, hidden)


# -- the catalog the model is sent -------------------------------------------------------


def _escaped(text: str) -> str:
    """Text that can neither open nor close an element of the catalog."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")


def catalog(skills: Sequence[Skill]) -> tuple[str, list[ev.ContextSource]]:
    """The skills as the model reads them (within the budget), and the
    sources of those described."""
    lines: list[str] = []
    sources: list[ev.ContextSource] = []
    left_out: list[str] = []
    used = 0
    for skill in skills:
        description = skill.description
        if len(description) > MAX_DESCRIPTION_CHARS:
            description = description[: MAX_DESCRIPTION_CHARS - 1] + "…"
        line = f'<skill name="{_escaped(skill.name)}">{_escaped(description)}</skill>'
        size = len(line.encode()) + 1
        if used + size > BUDGET_BYTES or len(lines) == MAX_DESCRIBED:
            left_out.append(skill.name)
            continue
        used += size
        lines.append(line)
        sources.append(
            ev.ContextSource(
                path=skill.path,
                digest=skill.digest,
                bytes=skill.bytes,
                sent_bytes=size,
                state="loaded",
                scope=skill.scope,
            )
        )
    block = "\n".join(["<skills>", *lines, "</skills>"])
    if left_out:
        names = ", ".join(_escaped(name) for name in left_out[:MAX_NAMED])
        if len(left_out) > MAX_NAMED:
            names += f" and {len(left_out) - MAX_NAMED} more (/skills lists them)"
        block += "\n" + LEFT_OUT_LINE.format(budget=BUDGET_BYTES, names=names)
    return block, sources


def added(block: str, sources: list[ev.ContextSource], heading: str) -> ev.ContextAdded:
    return ev.ContextAdded(capability=NAME, text=f"{heading}\n\n{block}", sources=sources)


# -- the session's part ----------------------------------------------------------------------


class SkillsPart(SessionPart):
    def __init__(self, scope: SessionScope) -> None:
        self.scope = scope
        # The catalog as the view shows it ("" when none), and its sources.
        self.block = ""
        self.sources: list[ev.ContextSource] = []

    def observe(self, event: ev.Event) -> None:
        kind = event.WhichOneof("body")
        if kind == "context_added" and event.context_added.capability == NAME:
            self._take(event.context_added)
        elif kind == "compaction":
            self._take(None)
            for context in event.compaction.context:
                if context.capability == NAME:
                    self._take(context)

    def _take(self, context: ev.ContextAdded | None) -> None:
        match = None if context is None else _CATALOG.search(context.text)
        self.block = "" if context is None else context.text[match.start() :] if match else ""
        self.sources = [] if context is None else list(context.sources)

    def carried(self) -> list[ev.ContextAdded]:
        return [added(self.block, self.sources, HEADING)] if self.block else []

    async def before_request(self) -> list[ev.Event]:
        found = await discover(self.scope)
        if not found.skills:
            if not self.block:
                return []
            return [ev.Event(context_added=ev.ContextAdded(capability=NAME, text=NONE_LEFT))]
        block, sources = catalog(found.skills)
        if block == self.block:
            return []
        heading = CHANGED_HEADING if self.block else HEADING
        return [ev.Event(context_added=added(block, sources, heading))]

    def readable(self) -> Sequence[Path]:
        # Those inside the session's folder are shown relative to it.
        folders = (Path(source.path).parent for source in self.sources)
        return [folder for folder in folders if folder.is_absolute()]


# -- the `skill` tool ----------------------------------------------------------------------


async def load_skill(context: ToolContext, args: Args) -> ToolOutcome:
    name = args.get("name")
    part = context.parts.get(NAME)
    if not isinstance(name, str) or not name.strip():
        return ToolOutcome(ok=False, error="name must be a skill's name")
    if not isinstance(part, SkillsPart):
        return ToolOutcome(ok=False, error="no skills are available in this session")
    found = await discover(part.scope)
    skill = found.named(name.strip())
    if skill is None:
        return ToolOutcome(ok=False, error=_unknown(name.strip(), found))
    files = await asyncio.to_thread(folder_files, skill)
    shown = ToolDisplay(f"skill {skill.name}")
    return ToolOutcome(ok=True, output=skill_text(skill, files), display=shown)


def _unknown(name: str, found: Found) -> str:
    """Why no skill has that name: its folder's problem, or the names there are."""
    problem = next((p for p in found.problems if Path(p.path).parent.name == name), None)
    if problem is not None:
        return f"the skill {name!r} cannot be loaded: {problem.path}: {problem.reason}"
    names = ", ".join(s.name for s in found.skills) or "none"
    return f"no skill is named {name!r}; the skills are: {names}"


def folder_files(skill: Skill) -> list[str]:
    """The files of the skill's folder, by the paths read_file takes (the
    folder as the catalog shows it, then the file's path in it)."""
    base = Path(skill.path).parent
    listed: list[str] = []
    for folder, subfolders, names in os.walk(skill.folder):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        for name in sorted(n for n in names if not n.startswith(".")):
            relative = Path(folder, name).relative_to(skill.folder)
            if relative.as_posix() != SKILL_FILE:
                listed.append((base / relative).as_posix())
            if len(listed) > MAX_LISTED_FILES:
                return listed
    return listed


def skill_text(skill: Skill, files: Sequence[str]) -> str:
    folder = Path(skill.path).parent.as_posix()
    heading = f"Skill {skill.name!r}, from {folder}/ (paths in it are relative to that folder):"
    parts = [heading, skill.body or "(its SKILL.md has no instructions)"]
    if files:
        shown = list(files[:MAX_LISTED_FILES])
        if len(files) > MAX_LISTED_FILES:
            shown.append(f"… more files; list_dir {Path(skill.path).parent} shows them all")
        parts.append("Files in the skill's folder (read them with read_file):\n" + "\n".join(shown))
    return "\n\n".join(parts)


# -- the capability ------------------------------------------------------------------------


class Skills(Capability):
    name = NAME

    def session(self, scope: SessionScope) -> SessionPart:
        return SkillsPart(scope)

    def tools(self) -> Sequence[Tool]:
        return (Tool(TOOL, TOOL_DESCRIPTION, TOOL_PARAMETERS, load_skill, Effect.READ),)

    def commands(self) -> Sequence[Command]:
        return (
            Command(
                "skills",
                "List the skills the model can load, where each is, and what is wrong with "
                "those it cannot.",
                "/skills",
                show_skills,
            ),
        )


async def show_skills(agent: AgentHandle, args: str | None) -> CommandResult:
    part = await agent.part(NAME)
    if not isinstance(part, SkillsPart):
        return CommandResult(False, "Skills are not available here.", agent.state.last_seq)
    found = await discover(part.scope)
    width = max((len(s.name) for s in found.skills), default=0)
    lines = [f"{s.name:<{width}}  {s.scope:<9}  {s.path}" for s in found.skills]
    if not found.skills:
        where = ", ".join(str(p) for p, _ in places(part.scope.cwd, part.scope.config_dir))
        lines.append(f"No skills (folders holding a SKILL.md) in {where}.")
    if found.problems:
        lines.append("Not loaded:")
        lines += [f"  {p.path}: {p.reason}" for p in found.problems]
    return CommandResult(True, "\n".join(lines), agent.state.last_seq)
