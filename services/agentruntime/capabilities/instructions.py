"""The repository's instructions: AGENTS.md (Codex, opencode and others) and
CLAUDE.md (Claude Code) files, read for the model as those agents read them.

Before the model first reads a prompt of the session, and before each of its
requests after, its view is brought in line with the files on disk:

  - the user's global file (AGENTS.md, then CLAUDE.md, in the user's
    agenthost config folder), then, in every folder from the project root
    (the git root above the session's folder, else that folder) down to the
    session's folder, AGENTS.md and then CLAUDE.md;
  - a deeper folder's files once a file tool has touched that folder;
  - a file changed since the model read it is sent again as updated, a
    removed one as removed.

A file whose trimmed text is the same as an earlier one's is read once (a
CLAUDE.md that copies or links AGENTS.md). All of it fits a budget (32 KB),
and what is cut is said to the model. Each file is framed in an
<instructions> element whose tags the file's own text can never produce. A
file in a hidden path (the stack's data, another session's folder), by its
real path (symlinks followed), is never read.

What was sent is recorded as context/added events (each file's path,
digest and sizes, and the text), so the model's view is rebuilt from the
log; a compaction carries the files of the view (`carried`), and resume and
fork keep them as they keep every event. `/context` lists the files in
effect; so does the `context` projection (capabilities/__init__.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev

from services.projection.unit import FoldUnit

from ..capability import AgentHandle, Capability, Command, CommandResult, SessionPart, SessionScope
from ..framing import element

NAME = "instructions"
FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
BUDGET_BYTES = 32 * 1024
# The file tools whose `path` argument says which folder they touched.
FILE_TOOLS = frozenset({"read_file", "list_dir", "glob", "grep", "write_file", "edit_file"})
LOADED, UPDATED, REMOVED = "loaded", "updated", "removed"
GLOBAL, PROJECT, NESTED = "global", "project", "nested"

HEADING = (
    "Instructions for this project from its AGENTS.md and CLAUDE.md files (and the user's "
    "global file). Follow them as you work; the user's own messages take precedence."
)
UPDATED_HEADING = "These instruction files changed since you read them; the new text applies:"
REMOVED_LINE = "The instruction file {path} was removed: what it said no longer applies."
CUT_NOTE = "[cut here: the instructions exceed {budget} bytes; read the rest with read_file]"
LEFT_OUT_LINE = (
    "Not loaded, over the {budget}-byte instructions budget: {paths} (read them with read_file)."
)
_FRAME = re.compile(r'<instructions path="([^"]*)" scope="[^"]*">\n.*?\n</instructions>', re.DOTALL)


@dataclass(frozen=True)
class InstructionFile:
    """A file as read from disk."""

    path: str  # as the model is told it: relative to the session's folder, or absolute
    scope: str
    text: str
    digest: str

    @property
    def size(self) -> int:
        return len(self.text.encode())

    @property
    def trimmed(self) -> str:
        return digest_of(self.text.strip().encode())


@dataclass(frozen=True)
class Sent:
    """A file as the model's view last showed it."""

    source: ev.ContextSource
    frame: str


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def frame(path: str, scope: str, text: str) -> str:
    """A file's text in its element; the text can neither open nor close one."""
    return element("instructions", {"path": path, "scope": scope}, text.strip())


def frames_by_path(text: str) -> dict[str, str]:
    """The frames a recorded text holds, by the path each names."""
    found = {}
    for match in _FRAME.finditer(text):
        path = match.group(1).replace("&quot;", '"').replace("&amp;", "&")
        found[path] = match.group(0)
    return found


# -- finding the files -------------------------------------------------------------------


def project_root(cwd: Path) -> Path:
    """The git root above the session's folder, else the folder itself."""
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return cwd


def folders_down(top: Path, bottom: Path) -> list[Path]:
    """Every folder from `top` down to `bottom`, both included."""
    if not bottom.is_relative_to(top):
        return [bottom]
    folders = [bottom]
    while folders[-1] != top:
        folders.append(folders[-1].parent)
    return folders[::-1]


def is_hidden(path: Path, cwd: Path, hidden: Sequence[Path]) -> bool:
    """Whether `path` (real) is hidden, or inside a hidden folder. A hidden
    folder holding the session's folder hides only what lies outside it."""
    for secret in hidden:
        if path.is_relative_to(secret):
            if cwd.is_relative_to(secret) and path.is_relative_to(cwd):
                continue
            return True
    return False


def read_instructions(
    folder: Path, name: str, scope: str, cwd: Path, hidden: Sequence[Path]
) -> InstructionFile | None:
    """The file `name` of `folder`, when it is there and may be read."""
    path = folder / name
    real = Path(os.path.realpath(path))
    if not real.is_file() or is_hidden(real, cwd, hidden):
        return None
    try:
        data = real.read_bytes()
    except OSError:
        return None
    shown = str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)
    return InstructionFile(shown, scope, data.decode("utf-8", errors="replace"), digest_of(data))


def candidates(cwd: Path, config_dir: Path, touched: Iterable[Path]) -> list[tuple[Path, str]]:
    """The instruction files there are, as (path, scope), in the order the
    model reads them: global, the project root down to `cwd`, nested."""
    places = [(config_dir, GLOBAL)]
    places += [(folder, PROJECT) for folder in folders_down(project_root(cwd), cwd)]
    nested = (f for t in touched if t != cwd for f in folders_down(cwd, t)[1:])
    places += [(folder, NESTED) for folder in dict.fromkeys(nested)]
    return [
        (folder / name, scope)
        for folder, scope in places
        for name in FILE_NAMES
        if (folder / name).is_file()
    ]


def read_all(
    found: Sequence[tuple[Path, str]], cwd: Path, hidden: Sequence[Path]
) -> list[InstructionFile]:
    """The files that may be read, each text once."""
    read, texts = [], set()
    for path, scope in found:
        file = read_instructions(path.parent, path.name, scope, cwd, hidden)
        if file is not None and file.trimmed not in texts:
            texts.add(file.trimmed)
            read.append(file)
    return read


def touched_folder(cwd: Path, args_json: str) -> Path | None:
    """The folder inside the session's that a file tool's `path` names."""
    try:
        args = json.loads(args_json or "{}")
    except ValueError:
        return None
    path = args.get("path") if isinstance(args, dict) else None
    if not isinstance(path, str) or not path:
        return None
    full = Path(os.path.normpath(os.path.join(cwd, path)))
    if not full.is_relative_to(cwd):
        return None
    return full if full.is_dir() else full.parent


# -- what the model is told -------------------------------------------------------------------


@dataclass
class Telling:
    """What one context/added will tell the model."""

    left: int
    new: list[str]
    updated: list[str]
    removed: list[str]
    left_out: list[str]
    sources: list[ev.ContextSource]

    def add(self, file: InstructionFile, state: str) -> None:
        """The file framed whole, or cut to what is left of the budget."""
        framed = frame(file.path, file.scope, file.text)
        if len(framed.encode()) > self.left:
            note = CUT_NOTE.format(budget=BUDGET_BYTES)
            room = self.left - len(frame(file.path, file.scope, note).encode()) - 1
            if room <= 0:
                self.left_out.append(file.path)
                return
            head = file.text.encode()[:room].decode(errors="ignore")
            framed = frame(file.path, file.scope, f"{head}\n{note}")
        self.left -= len(framed.encode())
        (self.new if state == LOADED else self.updated).append(framed)
        self.sources.append(
            ev.ContextSource(
                path=file.path,
                digest=file.digest,
                bytes=file.size,
                sent_bytes=len(framed.encode()),
                state=state,
                scope=file.scope,
            )
        )

    def text(self) -> str:
        parts = [HEADING, *self.new] if self.new else []
        if self.updated:
            parts += [UPDATED_HEADING, *self.updated]
        parts += [REMOVED_LINE.format(path=path) for path in self.removed]
        if self.left_out:
            paths = ", ".join(self.left_out)
            parts.append(LEFT_OUT_LINE.format(budget=BUDGET_BYTES, paths=paths))
        return "\n\n".join(parts)


def changes(sent: dict[str, Sent], found: Sequence[InstructionFile]) -> ev.ContextAdded | None:
    """What the view, showing `sent`, must be told of the files `found`."""
    used = sum(len(s.frame.encode()) for s in sent.values())
    telling = Telling(BUDGET_BYTES - used, [], [], [], [], [])
    for file in found:
        shown = sent.get(file.path)
        if shown is not None and shown.source.digest == file.digest:
            continue
        if shown is not None:
            telling.left += len(shown.frame.encode())
        telling.add(file, LOADED if shown is None else UPDATED)
    present = {file.path for file in found}
    for path in sent:
        if path not in present:
            telling.removed.append(path)
            telling.sources.append(ev.ContextSource(path=path, state=REMOVED))
    if not telling.sources:
        return None
    return ev.ContextAdded(capability=NAME, text=telling.text(), sources=telling.sources)


# -- the session's part ------------------------------------------------------------------------


class InstructionsPart(SessionPart):
    def __init__(self, scope: SessionScope) -> None:
        self._scope = scope
        # Path -> what the view shows of it.
        self.sent: dict[str, Sent] = {}
        # Folders inside the session's that file tools touched, in the view.
        self._touched: list[Path] = []

    def observe(self, event: ev.Event) -> None:
        kind = event.WhichOneof("body")
        if kind == "context_added" and event.context_added.capability == NAME:
            self._take(event.context_added)
        elif kind == "compaction":
            self.sent = {}
            for context in event.compaction.context:
                if context.capability == NAME:
                    self._take(context)
        elif kind == "tool_call" and event.tool_call.name in FILE_TOOLS:
            folder = touched_folder(self._scope.cwd, event.tool_call.args_json)
            if folder is not None:
                self._touch(folder)

    def _take(self, added: ev.ContextAdded) -> None:
        frames = frames_by_path(added.text)
        for source in added.sources:
            if source.state == REMOVED:
                self.sent.pop(source.path, None)
                continue
            self.sent[source.path] = Sent(source, frames.get(source.path, ""))
            if source.scope == NESTED:  # its folder stays touched through a compaction
                self._touch((self._scope.cwd / source.path).parent)

    def _touch(self, folder: Path) -> None:
        if folder not in self._touched:
            self._touched.append(folder)

    def carried(self) -> list[ev.ContextAdded]:
        if not self.sent:
            return []
        sources = []
        for shown in self.sent.values():
            source = ev.ContextSource()
            source.CopyFrom(shown.source)
            source.state = LOADED
            sources.append(source)
        text = "\n\n".join([HEADING, *(shown.frame for shown in self.sent.values())])
        return [ev.ContextAdded(capability=NAME, text=text, sources=sources)]

    async def before_request(self) -> list[ev.Event]:
        cwd = self._scope.cwd
        there = await asyncio.to_thread(candidates, cwd, self._scope.config_dir, self._touched)
        # What is hidden is asked only when there is a file to check against it.
        hidden = await self._scope.hidden() if there else ()
        found = await asyncio.to_thread(read_all, there, cwd, hidden)
        added = changes(self.sent, found)
        return [] if added is None else [ev.Event(context_added=added)]


# -- the capability --------------------------------------------------------------------------


class Instructions(Capability):
    name = NAME

    def session(self, scope: SessionScope) -> SessionPart:
        return InstructionsPart(scope)

    def commands(self) -> Sequence[Command]:
        return (
            Command(
                "context",
                "List the instruction files (AGENTS.md, CLAUDE.md) in the model's context.",
                "/context",
                show_context,
            ),
        )


async def show_context(agent: AgentHandle, args: str | None) -> CommandResult:
    part = await agent.part(NAME)
    sent = part.sent if isinstance(part, InstructionsPart) else {}
    if not sent:
        return CommandResult(True, "No instruction files in context.", agent.state.last_seq)
    lines = [_context_line(shown.source) for shown in sent.values()]
    total = sum(shown.source.sent_bytes for shown in sent.values())
    lines.append(f"{len(sent)} file(s), {total} bytes of {BUDGET_BYTES} in context")
    return CommandResult(True, "\n".join(lines), agent.state.last_seq)


def _context_line(source: ev.ContextSource) -> str:
    cut = " (cut)" if source.sent_bytes < source.bytes else ""
    return f"{source.path}  {source.scope}  {source.bytes} bytes{cut}  {source.digest[:19]}"


# -- the `context` projection: the files in effect -------------------------------------------


@dataclass(frozen=True)
class ContextFile:
    path: str
    scope: str
    digest: str
    bytes: int
    sent_bytes: int


@dataclass(frozen=True)
class ContextFold:
    files: tuple[ContextFile, ...] = ()


CONTEXT_KINDS = frozenset({"context_added", "compaction"})


def fold_context(state: ContextFold, event: ev.Event) -> ContextFold:
    """The instruction files in the model's view after one more event."""
    kind = event.WhichOneof("body")
    if kind == "context_added" and event.context_added.capability == NAME:
        files = {f.path: f for f in state.files}
        _apply_sources(files, event.context_added.sources)
    elif kind == "compaction":
        files = {}
        for context in event.compaction.context:
            if context.capability == NAME:
                _apply_sources(files, context.sources)
    else:
        return state
    new = ContextFold(tuple(files.values()))
    return state if new == state else new


def _apply_sources(files: dict[str, ContextFile], sources: Iterable[ev.ContextSource]) -> None:
    for s in sources:
        if s.state == REMOVED:
            files.pop(s.path, None)
        else:
            files[s.path] = ContextFile(s.path, s.scope, s.digest, s.bytes, s.sent_bytes)


def context_view(state: ContextFold) -> dict[str, Any]:
    """The `context` projection value: the instruction files the model has."""
    return {
        "files": [
            {
                "path": f.path,
                "scope": f.scope,
                "digest": f.digest,
                "bytes": f.bytes,
                "sent_bytes": f.sent_bytes,
            }
            for f in state.files
        ],
        "budget_bytes": BUDGET_BYTES,
    }


def load_context(data: dict[str, Any]) -> ContextFold:
    return ContextFold(tuple(ContextFile(**f) for f in data["files"]))


CONTEXT_UNIT = FoldUnit(
    "context", 1, ContextFold, fold_context, context_view, load_context, CONTEXT_KINDS
)
