"""File references: `@path` in a prompt attaches that file to it, as Claude
Code, Codex and opencode users write them.

When a prompt is taken, each `@word` of its text (at its start or after a
space; `@"a path"` for one with spaces) that names a file of the session's
folder attaches that file to the prompt's user/message (UserMessage.files:
its path, digest, size, the text the model is sent, whether it was cut); a
folder attaches its listing. The model reads them after the prompt's text
(transcript.py renders them). An editor's resources (ACP) arrive the same
way: a link is read like an `@path`, an embedded resource's text is the
editor's. A file whose bytes are an image (PNG, JPEG, GIF, WebP) is sent
as an image instead (the images capability stores and checks it).

Paths are checked exactly as read_file checks them (WorkspaceFiles.resolve:
the sandbox's confinement to the session's folder, hidden paths), before
anything is read: a path it refuses refuses the prompt with a typed error
(FILE_REFERENCE_REFUSED), and nothing is recorded. An `@word` that names no
file (an e-mail address, a person) stays text. What is attached is bounded:
FILE_BYTES of each file, MESSAGE_BYTES for one message, MAX_FILES files.

A compaction carries the files attached since the one before (the latest
of each path, the most recent first, within CARRIED_BYTES; the others named
only), as they were when attached, so the work goes on from them.

The same check lists the paths a client completes after `@` (`list_paths`).
"""

from __future__ import annotations

import asyncio
import codecs
import hashlib
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core import images
from services.common.errors import InvalidArgument

from ..capability import Capability, Prompt, Resource, SessionPart, SessionScope
from ..transcript import attached_text
from ..workspace_catalog import files_of
from ..workspace_tools import (
    AGENTHOST_FOLDER,
    BINARY_SNIFF_BYTES,
    VCS_FOLDERS,
    PathRefused,
    WorkspaceFiles,
    is_binary,
)

NAME = "references"
# What the model is sent of one file, of all a message attaches, and how many.
FILE_BYTES = 32 * 1024
MESSAGE_BYTES = 128 * 1024
MAX_FILES = 32
# Paths listed for completion (by default, at most), and entries looked at.
DEFAULT_PATHS = 50
MAX_PATHS = 500
SCANNED_ENTRIES = 10_000
# `@` at the start or after white space, then a path (quoted when it has spaces).
_REFERENCE = re.compile(r'(?<!\S)@(?:"([^"\n]+)"|(\S+))')
# What may end a sentence after a path ("look at @app.py.").
_TRAILING = ".,;:!?)]}'\"`"
BINARY_NOTE = "(a binary file of {size} bytes: not shown)"
# What a compaction carries of the files attached before it.
CARRIED_BYTES = 32 * 1024
CARRIED_HEADING = (
    "Files the user attached to earlier messages, as they were then (read_file shows "
    "them as they are now):"
)
NOT_CARRIED = "Also attached earlier, not shown again: {paths}."
READ_CHUNK = 1 << 20


class FileReferenceRefused(InvalidArgument):
    """A prompt names a file the agent may not read: nothing is recorded."""

    REASON = "FILE_REFERENCE_REFUSED"

    def __init__(self, path: str, why: str) -> None:
        super().__init__(self.REASON, f"cannot attach {path}: {why}", path=path)


@dataclass(frozen=True)
class PathListing:
    paths: tuple[tuple[str, bool], ...]  # (path, folder)
    truncated: bool


def references_in(text: str) -> list[str]:
    """The paths `@` names in `text`, in order, each once."""
    found = (quoted or bare for quoted, bare in _REFERENCE.findall(text))
    return list(dict.fromkeys(found))


# -- reading what is attached ---------------------------------------------------------------


@dataclass
class Attaching:
    """The files of one message so far, and what is left of its bound."""

    files: WorkspaceFiles
    left: int = MESSAGE_BYTES
    attached: list[ev.AttachedFile] = field(default_factory=list)
    seen: set[Path] = field(default_factory=set)
    # The image files named (an image is sent as one, never as text).
    images: list[ev.ImageInput] = field(default_factory=list)

    def add_path(self, written: str, real: Path) -> None:
        """A file or folder named by a prompt: an image file as an image."""
        if real in self.seen:
            return
        image = read_image(self.files, written, real)
        if image is None:
            self.add(read_file(self.files, written, real, self.room), real)
        else:
            self.seen.add(real)
            self.images.append(image)

    def add(self, file: ev.AttachedFile, real: Path | None = None) -> None:
        if real is not None:
            if real in self.seen:
                return
            self.seen.add(real)
        if len(self.attached) >= MAX_FILES:
            raise FileReferenceRefused(file.path, f"a prompt attaches at most {MAX_FILES} files")
        self.left -= len(file.text.encode())
        self.attached.append(file)

    @property
    def room(self) -> int:
        return max(min(FILE_BYTES, self.left), 0)


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def head_text(data: bytes, room: int) -> tuple[str, bool]:
    """The UTF-8 text of at most `room` bytes of `data` (a character cut in
    two is left out), and whether it was cut."""
    if len(data) <= room:
        return data.decode("utf-8", "replace"), False
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    return decoder.decode(data[:room], final=False), True


def _resolved(files: WorkspaceFiles, written: str, named: str = "") -> Path:
    """The real path read_file would read; refused as read_file refuses it
    (`named`: how the prompt named it, "@path" by default)."""
    try:
        return files.resolve(written)
    except PathRefused as refused:
        raise FileReferenceRefused(named or f"@{written}", str(refused)) from None


def _named(files: WorkspaceFiles, word: str) -> tuple[str, Path] | None:
    """The path an `@word` names and its real path, None when it names no
    file (punctuation after it is tried without). Refused as read_file
    refuses it, whether or not it exists."""
    trimmed = word.rstrip(_TRAILING)
    for written in dict.fromkeys((word, trimmed)):
        if not written:
            continue
        real = _resolved(files, written)
        if real.exists():
            return written, real
    return None


def read_image(files: WorkspaceFiles, written: str, real: Path) -> ev.ImageInput | None:
    """An image file (by its first bytes) as an image to send, or None.
    One over the limit is read just past it, for the images capability to
    refuse it as too large."""
    if not real.is_file():
        return None
    with real.open("rb") as handle:
        head = handle.read(images.SNIFF_BYTES)
        if images.media_type_of(head) is None:
            return None
        data = head + handle.read(images.MAX_IMAGE_BYTES + 1 - len(head))
    return ev.ImageInput(data=data, name=files.display(written))


def read_file(files: WorkspaceFiles, written: str, real: Path, room: int) -> ev.AttachedFile:
    """A file of the session's folder as attached: its head (at most `room`
    bytes), the digest and size of all of it; a folder's listing."""
    shown = files.display(written)
    info = real.stat()
    if stat.S_ISDIR(info.st_mode):
        return read_folder(files, shown, real, room)
    if not stat.S_ISREG(info.st_mode):
        raise FileReferenceRefused(f"@{written}", f"{shown} is not a regular file")
    digest, head = hashlib.sha256(), b""
    with real.open("rb") as handle:
        while chunk := handle.read(READ_CHUNK):
            digest.update(chunk)
            if len(head) <= room:
                head += chunk[: room + 1 - len(head)]
    size = info.st_size
    if is_binary(head[:BINARY_SNIFF_BYTES]):
        text, cut = BINARY_NOTE.format(size=size), False
    else:
        text, cut = head_text(head, room)
    return ev.AttachedFile(
        path=shown,
        digest="sha256:" + digest.hexdigest(),
        size=size,
        text=text,
        cut=cut,
        kind=ev.ATTACHED_KIND_FILE,
    )


def read_folder(files: WorkspaceFiles, shown: str, real: Path, room: int) -> ev.AttachedFile:
    """A folder's entries, one a line (a sub-folder's ending with "/"), as
    far as `room` allows."""
    with os.scandir(real) as scan:
        names = sorted(entry.name + ("/" if _is_folder(entry) else "") for entry in scan)
    listing = "\n".join(names).encode()
    text, cut = head_text(listing, room)
    if cut:
        text = text.rpartition("\n")[0]  # whole names only
    return ev.AttachedFile(
        path=shown.rstrip("/") + "/",
        digest=digest_of(listing),
        size=len(names),
        text=text if names else "(an empty folder)",
        cut=cut,
        kind=ev.ATTACHED_KIND_FOLDER,
    )


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def attach_words(attaching: Attaching, words: Iterable[str]) -> None:
    for word in words:
        named = _named(attaching.files, word)
        if named is not None:
            attaching.add_path(*named)


def attach_resources(attaching: Attaching, resources: Iterable[Resource]) -> None:
    """An editor's links (read like an `@path`; one that names no file is
    refused: the editor meant a file) and embedded texts."""
    for resource in resources:
        path = resource_path(resource.uri)
        if resource.text is not None:
            shown = attaching.files.display(path) if path is not None else resource.uri
            data = resource.text.encode()
            text, cut = head_text(data, attaching.room)
            attaching.add(
                ev.AttachedFile(
                    path=shown,
                    digest=digest_of(data),
                    size=len(data),
                    text=text,
                    cut=cut,
                    kind=ev.ATTACHED_KIND_EDITOR,
                )
            )
        elif path is not None:
            real = _resolved(attaching.files, path, resource.uri)
            if not real.exists():
                raise FileReferenceRefused(resource.uri, "no such file")
            attaching.add_path(path, real)


def resource_path(uri: str) -> str | None:
    """The path a resource's URI names (a file:// URI, or a plain path);
    None for another scheme (a web page: nothing to read)."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if parsed.scheme and "://" in uri:
        return None
    return uri


def attach(files: WorkspaceFiles, words: Sequence[str], resources: Sequence[Resource]) -> Attaching:
    """What a prompt attaches: its `@` references, then the editor's
    resources (the files, and the images)."""
    attaching = Attaching(files)
    attach_words(attaching, words)
    attach_resources(attaching, resources)
    return attaching


# -- completion ---------------------------------------------------------------------------------


def list_paths(files: WorkspaceFiles, prefix: str, limit: int) -> PathListing:
    """The entries of the folder `prefix` names whose name starts with what
    follows its last "/", as paths relative to the session's folder; hidden
    and refused ones are left out, dot-files unless the name asks for them."""
    folder, _, start = prefix.rpartition("/")
    try:
        top = files.resolve(folder or ".")
        scan = os.scandir(top) if top.is_dir() else None
    except (PathRefused, OSError):
        return PathListing((), False)
    if scan is None:
        return PathListing((), False)
    found: list[tuple[str, bool]] = []
    with scan:
        for number, entry in enumerate(scan):
            if number >= SCANNED_ENTRIES:
                break
            name = entry.name
            if not name.startswith(start) or (name.startswith(".") and not start.startswith(".")):
                continue
            if name in VCS_FOLDERS or name == AGENTHOST_FOLDER:
                continue
            path = f"{folder}/{name}" if folder else name
            if not _reachable(files, path):
                continue
            is_folder = _is_folder(entry)
            found.append((path + "/" if is_folder else path, is_folder))
    found.sort()
    return PathListing(tuple(found[:limit]), len(found) > limit)


def _reachable(files: WorkspaceFiles, path: str) -> bool:
    try:
        files.resolve(path)
    except PathRefused:
        return False
    return True


# -- through a compaction -----------------------------------------------------------------------


def carried_files(files: Sequence[ev.AttachedFile]) -> ev.ContextAdded:
    """The files a compaction keeps, the most recent first, as far as
    CARRIED_BYTES goes; the rest named."""
    shown, sources, left_out, left = [], [], [], CARRIED_BYTES
    for file in reversed(files):
        text = attached_text(file)
        if len(text.encode()) > left:
            left_out.append(file.path)
            continue
        left -= len(text.encode())
        shown.append(text)
        sent = len(file.text.encode())
        source = ev.ContextSource(path=file.path, digest=file.digest, bytes=file.size)
        source.sent_bytes, source.scope = sent, "attached"
        sources.append(source)
    parts = [CARRIED_HEADING, *shown] if shown else []
    if left_out:
        parts.append(NOT_CARRIED.format(paths=", ".join(left_out)))
    return ev.ContextAdded(capability=NAME, text="\n\n".join(parts), sources=sources)


# -- the session's part and the capability ---------------------------------------------------


class ReferencesPart(SessionPart):
    def __init__(self, scope: SessionScope) -> None:
        self._scope = scope
        # The files the view's messages attached since its compaction: the
        # latest of each path, in the order attached.
        self.attached: dict[str, ev.AttachedFile] = {}

    def observe(self, event: ev.Event) -> None:
        kind = event.WhichOneof("body")
        if kind == "user_message":
            for file in event.user_message.files:
                self.attached.pop(file.path, None)
                self.attached[file.path] = file
        elif kind == "compaction":
            self.attached = {}

    def carried(self) -> list[ev.ContextAdded]:
        return [] if not self.attached else [carried_files(list(self.attached.values()))]

    async def files(self) -> WorkspaceFiles:
        """The session's folder as its file tools see it now."""
        scope = self._scope
        return files_of(scope.cwd, scope.state().settings.sandbox, await scope.hidden())

    async def on_prompt(self, prompt: Prompt) -> None:
        words = references_in(prompt.text)
        if not words and not prompt.resources:
            return
        files = await self.files()
        attaching = await asyncio.to_thread(attach, files, words, prompt.resources)
        prompt.message.files.extend(attaching.attached)
        prompt.images.extend(attaching.images)

    async def list_paths(self, prefix: str, limit: int = 0) -> PathListing:
        files = await self.files()
        wanted = min(limit or DEFAULT_PATHS, MAX_PATHS)
        return await asyncio.to_thread(list_paths, files, prefix, wanted)


class FileReferences(Capability):
    name = NAME

    def session(self, scope: SessionScope) -> SessionPart:
        return ReferencesPart(scope)
