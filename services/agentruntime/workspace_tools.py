"""The file tools a coding agent uses in its session's working folder.

Three rules shape every function here:

* Paths are confined to the session's folder. The model proposes paths, and a
  model can be wrong or be talked into mischief by the text it reads, so with
  ``confined=True`` every path is resolved the way the operating system would
  resolve it (symlinks followed, ``..`` applied) and refused when it lands
  outside the root (a read may also land in the ``readable`` folders given, a
  skill's folder, say; never a write). The tools then act on the resolved
  path, never on the raw string, so what was checked is what is touched. A
  "full" sandbox passes ``confined=False`` and may reach anywhere.
* Results are text a model reads. Output is line-oriented, capped (a model's
  context is finite and a huge answer crowds out the task) and every cap ends
  with a note saying how to get the rest, so the model can carry on by itself.
* No input ever crashes the runtime. Arguments come from a model: wrong types,
  NUL bytes, lone surrogates, missing files, directories where files were
  expected. Every public tool method answers ``ToolOutcome(ok=False, error=...)``
  with a one-line reason instead of raising, and blocking file I/O runs on a
  worker thread so a slow disk never stalls the event loop.

Smaller decisions: glob and grep walk the tree without entering symlinked
folders (no loops, no duplicates) and skip VCS folders; a symlinked file counts
when its target is allowed. grep's ``glob`` matches the file name when it has no
'/', else the path relative to the root. A glob's trailing ``**`` matches every
file below. edit_file given '\\n' strings for a CRLF file matches and writes
'\\r\\n', so the file keeps its line endings.

This module knows nothing about gRPC; the runtime wraps these methods as tools.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from .tools import ToolOutcome

MAX_READ_LINES = 2000
MAX_READ_BYTES = 256 * 1024
# edit_file holds a file, its edit and their diff in memory: larger files are
# refused (a command such as sed edits them); write_file then shows no diff.
MAX_EDIT_FILE_BYTES = 4 * 1024 * 1024
BINARY_SNIFF_BYTES = 8 * 1024
MAX_LIST_ENTRIES = 1000
MAX_GLOB_RESULTS = 500
DEFAULT_GREP_RESULTS = 200
MAX_GREP_RESULTS = 1000
MAX_GREP_FILE_BYTES = 2 * 1024 * 1024
MAX_GREP_LINE_CHARS = 500
VCS_FOLDERS = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs", "CVS"})
# agenthost's own folder in a workspace (spilled tool outputs): not walked by
# glob and grep, whose results it would fill with copies of old outputs.
AGENTHOST_FOLDER = ".agenthost"

T = TypeVar("T")


class _Refusal(Exception):
    """A tool call that cannot be done; the message is the model-facing reason."""


class PathRefused(_Refusal):
    """A path the tools will not touch; the message is the user/model-facing reason."""


@dataclass(frozen=True)
class FileChange:
    """What write_file / edit_file did, for display."""

    path: str
    added: int
    removed: int
    diff: str
    created: bool


@dataclass(frozen=True)
class FileEdit:
    outcome: ToolOutcome
    change: FileChange | None


# --- argument checks ------------------------------------------------------------------


def _text_arg(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise _Refusal(f"{name} must be a string")
    try:
        value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise _Refusal(f"{name} is not valid Unicode text") from None
    return value


def _int_arg(name: str, value: object, *, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Refusal(f"{name} must be an integer")
    if value < minimum:
        raise _Refusal(f"{name} must be at least {minimum}")
    return value


def _bool_arg(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _Refusal(f"{name} must be true or false")
    return value


def _utf8(name: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise _Refusal(f"{name} is not valid Unicode text (it has a lone surrogate)") from None


# --- small text helpers ---------------------------------------------------------------


def _safe(text: str) -> str:
    """Text that always encodes as UTF-8 (file names may carry surrogate escapes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _split_lines(text: str) -> list[str]:
    """Lines split on '\\n' (a trailing '\\r' dropped), as editors and read_file count them."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _split_keepends(text: str) -> list[str]:
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    return [*lines, pieces[-1]] if pieces[-1] else lines


def _decode(raw: bytes) -> tuple[str, bool]:
    """The text of raw bytes and whether undecodable bytes were replaced."""
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), True


def is_binary(head: bytes) -> bool:
    return b"\0" in head[:BINARY_SNIFF_BYTES]


def _ok(text: str) -> ToolOutcome:
    return ToolOutcome(ok=True, output=_safe(text))


def _failed(reason: str) -> ToolOutcome:
    return ToolOutcome(ok=False, error=_safe(reason))


def _nothing(reason: str) -> None:
    return None


def _failed_edit(reason: str) -> FileEdit:
    return FileEdit(outcome=_failed(reason), change=None)


def _guarded(verb: str, path: object, work: Callable[[], T], failed: Callable[[str], T]) -> T:
    """Run one tool call; every refusal or OS error becomes a one-line reason."""
    try:
        return work()
    except _Refusal as error:
        return failed(str(error))
    except OSError as error:
        return failed(f"cannot {verb} {path!r}: {error.strerror or error}")
    except (ValueError, RecursionError) as error:
        return failed(f"cannot {verb} {path!r}: {error}")


# --- diffs ----------------------------------------------------------------------------


def _line_counts(before: list[str], after: list[str]) -> tuple[int, int]:
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after).get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed


def _unified_diff(shown: str, before: list[str], after: list[str], created: bool) -> str:
    source = "/dev/null" if created else f"a/{shown}"
    lines = difflib.unified_diff(before, after, fromfile=source, tofile=f"b/{shown}")
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def _file_change(shown: str, old: str, new: str, *, created: bool) -> FileChange:
    before, after = _split_keepends(old), _split_keepends(new)
    added, removed = _line_counts(before, after)
    diff = _safe(_unified_diff(shown, before, after, created))
    return FileChange(path=_safe(shown), added=added, removed=removed, diff=diff, created=created)


# --- glob matching --------------------------------------------------------------------


def _pattern_parts(pattern: str) -> tuple[str, ...]:
    parts = [part for part in pattern.split("/") if part not in ("", ".")]
    collapsed = [p for i, p in enumerate(parts) if not (p == "**" and parts[i - 1 : i] == ["**"])]
    return tuple(collapsed)


def _glob_match(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """pathlib-style matching: '**' is any number of folders, '*' stays in one name."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return not rest or any(_glob_match(parts[i:], rest) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], head) and _glob_match(parts[1:], rest)


def _check_glob(pattern: str, name: str) -> tuple[str, ...]:
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise PathRefused(
            f"{name} {pattern!r} would leave the search folder; patterns are relative to path "
            "(pass path to search elsewhere)"
        )
    parts = _pattern_parts(pattern)
    if not parts:
        raise _Refusal(f"{name} is empty")
    return parts


# --- path resolution ------------------------------------------------------------------

MAX_SYMLINKS = 40  # as the Linux kernel


def _kind(candidate: str, path: str) -> str:
    """'missing', 'link' or 'entry' for one path component."""
    try:
        mode = os.lstat(candidate).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as error:
        raise PathRefused(f"cannot resolve path {path!r}: {error.strerror or error}") from None
    return "link" if stat.S_ISLNK(mode) else "entry"


def _check_path(path: object) -> None:
    if not isinstance(path, str):
        raise PathRefused("path must be a string")
    if not path.strip():
        raise PathRefused("path is empty")
    if "\0" in path:
        raise PathRefused("path contains a NUL byte")
    try:
        path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise PathRefused("path is not valid Unicode text") from None


def _read_link(candidate: str, path: str) -> str:
    try:
        return os.readlink(candidate)
    except OSError as error:
        raise PathRefused(f"cannot resolve path {path!r}: {error.strerror or error}") from None


def _physical(root: str, path: str) -> str:
    """The path the OS would reach from root: symlinks followed, '..' applied to the
    real folder, components that do not exist yet kept as written ('..' after one
    just drops it). os.path.realpath is not enough: on a symlink loop it returns
    the rest of the path unresolved, symlinks and all."""
    current = "/" if path.startswith("/") else root
    pending, links, missing = path.split("/")[::-1], 0, 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            current, missing = os.path.dirname(current), max(missing - 1, 0)
            continue
        candidate = os.path.join(current, name)
        kind = "missing" if missing else _kind(candidate, path)
        if kind != "link":
            current, missing = candidate, missing + (kind == "missing")
            continue
        links += 1
        if links > MAX_SYMLINKS:
            raise PathRefused(f"path {path!r} runs into a symlink loop")
        target = _read_link(candidate, path)
        pending.extend(target.split("/")[::-1])
        current = "/" if target.startswith("/") else current
    return current


# --- read_file ------------------------------------------------------------------------


@dataclass
class _Page:
    lines: list[str]
    total: int = 0
    replaced: bool = False
    cut_line: int | None = None


def _count_rest(handle: BinaryIO) -> int:
    """Lines left in handle after the current position."""
    count, last = 0, b"\n"
    while chunk := handle.read(1 << 20):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")


def _next_line(handle: BinaryIO, limit: int) -> bytes:
    """The next line, at most `limit` bytes of it (the rest is skipped, so a
    file of one huge line is never read into memory whole)."""
    line = handle.readline(limit)
    if len(line) == limit and not line.endswith(b"\n"):
        while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
            pass
    return line


def _read_page(handle: BinaryIO, first: int, count: int) -> _Page:
    page, budget, number = _Page(lines=[]), MAX_READ_BYTES, 0
    while len(page.lines) < count and budget > 0 and (raw := _next_line(handle, budget + 1)):
        number += 1
        if number < first:
            continue
        text, replaced = _decode(raw.removesuffix(b"\n").removesuffix(b"\r"))
        page.replaced |= replaced
        line = f"{number:>6}\t{text}"
        size = len(line.encode("utf-8", "replace")) + 1
        if size > budget:
            if page.lines:
                break
            line, page.cut_line = line[: budget // 4] + "…", number
        page.lines.append(line)
        budget -= size
    page.total = number + _count_rest(handle)
    return page


def _render_page(shown: str, first: int, page: _Page) -> str:
    last = first + len(page.lines) - 1
    notes = []
    if page.replaced:
        notes.append("(not valid UTF-8 text; undecodable bytes are shown as \ufffd)")
    if page.cut_line is not None:
        notes.append(f"… line {page.cut_line} is longer than the output cap and was cut")
    if last < page.total:
        notes.append(
            f"… file has {page.total} lines; showing {first}-{last}; "
            f"call again with offset={last + 1}"
        )
    body = "\n".join(page.lines)
    return f"{body}\n\n" + "\n".join(notes) if notes else body


# --- the tools ------------------------------------------------------------------------


class WorkspaceFiles:
    """File tools over one session folder; see the module docstring for the rules."""

    def __init__(
        self,
        root: Path,
        *,
        confined: bool = True,
        hidden: Sequence[Path] = (),
        readable: Sequence[Path] = (),
    ) -> None:
        self._root = Path(os.path.realpath(root))
        self._confined = confined
        # What the tools may not touch even inside the folder (as confined
        # commands may not: the stack's data, its secrets, other sessions'
        # folders nested in this one).
        # A hidden folder holding the session folder hides only what lies
        # outside it, which confinement keeps out of reach but for `readable`.
        real = tuple(Path(os.path.realpath(p)) for p in hidden) if confined else ()
        self._hidden = tuple(p for p in real if not self._root.is_relative_to(p))
        self._hidden_outside = real
        # Folders outside the root that may be read, never written (a skill's
        # folder in the user's config folder); what is hidden stays hidden.
        self._readable = tuple(Path(os.path.realpath(p)) for p in readable) if confined else ()

    @property
    def root(self) -> Path:
        return self._root

    # paths

    def resolve(self, path: str, *, for_write: bool = False) -> Path:
        """The real path a tool acts on; raises PathRefused when it may not be touched.

        Only what exists is resolved, so a file to be written resolves through its
        nearest existing parent."""
        _check_path(path)
        resolved = Path(_physical(str(self._root), path))
        if self._confined and not resolved.is_relative_to(self._root):
            if not self._is_readable(resolved):
                raise PathRefused(self._outside(path))
            if for_write:
                raise PathRefused(
                    f"path {path!r} is outside the session folder {self._root}: "
                    "it may be read, never written"
                )
        if self._is_hidden(resolved):
            raise PathRefused(
                f"path {path!r} is hidden from the agent (the stack's data, a secret or "
                "another session's folder)"
            )
        if for_write and resolved == self._root:
            raise PathRefused(f"path {path!r} is the session folder itself, not a file")
        return resolved

    def _outside(self, path: str) -> str:
        lexical = Path(os.path.normpath(os.path.join(self._root, path)))
        if lexical.is_relative_to(self._root):
            return f"path {path!r} leads outside the session folder {self._root} through a symlink"
        return f"path {path!r} is outside the session folder {self._root}"

    def display(self, path: str) -> str:
        """The path as the user would write it: relative to the root when inside it."""
        lexical = Path(os.path.normpath(os.path.join(self._root, path)))
        return self._shown(lexical)

    def _shown(self, full: Path) -> str:
        if full.is_relative_to(self._root):
            return full.relative_to(self._root).as_posix() or "."
        return str(full)

    def _is_hidden(self, resolved: Path) -> bool:
        inside = resolved.is_relative_to(self._root)
        hidden = self._hidden if inside else self._hidden_outside
        return any(resolved.is_relative_to(folder) for folder in hidden)

    def _is_readable(self, resolved: Path) -> bool:
        """Outside the root, in one of the folders that may be read."""
        return any(resolved.is_relative_to(folder) for folder in self._readable)

    def _may_read(self, full: str) -> bool:
        if not self._confined:
            return True
        real = Path(os.path.realpath(full))
        inside = real.is_relative_to(self._root) or self._is_readable(real)
        return inside and not self._is_hidden(real)

    # public tools (each runs off the event loop and never raises for bad input)

    async def read_file(
        self, path: str, offset: int | None = None, limit: int | None = None
    ) -> ToolOutcome:
        work = functools.partial(self._read_file, path, offset, limit)
        return await asyncio.to_thread(_guarded, "read", path, work, _failed)

    async def list_dir(self, path: str = ".") -> ToolOutcome:
        work = functools.partial(self._list_dir, path)
        return await asyncio.to_thread(_guarded, "list", path, work, _failed)

    async def glob(self, pattern: str, path: str = ".") -> ToolOutcome:
        work = functools.partial(self._glob, pattern, path)
        return await asyncio.to_thread(_guarded, "search", path, work, _failed)

    async def grep(
        self,
        pattern: str,
        path: str = ".",
        glob: str | None = None,
        ignore_case: bool = False,
        max_results: int | None = None,
    ) -> ToolOutcome:
        work = functools.partial(self._grep, pattern, path, glob, ignore_case, max_results)
        return await asyncio.to_thread(_guarded, "search", path, work, _failed)

    async def write_file(self, path: str, content: str) -> FileEdit:
        work = functools.partial(self._write_file, path, content)
        return await asyncio.to_thread(_guarded, "write", path, work, _failed_edit)

    async def edit_file(
        self, path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> FileEdit:
        work = functools.partial(self._edit_file, path, old_string, new_string, replace_all)
        return await asyncio.to_thread(_guarded, "edit", path, work, _failed_edit)

    # Previews: the change a call would make, for its approval question,
    # computed from the file as it is now; None when the call would fail.

    async def preview_write(self, path: str, content: str) -> FileChange | None:
        work = functools.partial(self._planned_write, path, content)
        return await asyncio.to_thread(_guarded, "write", path, work, _nothing)

    async def preview_edit(
        self, path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> FileChange | None:
        def work() -> FileChange:
            shown, text, updated, _ = self._planned_edit(path, old_string, new_string, replace_all)
            return _file_change(shown, text, updated, created=False)

        return await asyncio.to_thread(_guarded, "edit", path, work, _nothing)

    # read_file

    def _read_file(self, path: str, offset: object, limit: object) -> ToolOutcome:
        first = _int_arg("offset", offset, minimum=1) or 1
        count = min(_int_arg("limit", limit, minimum=1) or MAX_READ_LINES, MAX_READ_LINES)
        target, shown = self.resolve(path), self.display(path)
        size = self._regular_file(target, shown, "use list_dir to see its entries").st_size
        with target.open("rb") as handle:
            if is_binary(handle.read(BINARY_SNIFF_BYTES)):
                return _ok(f"{shown}: binary file ({size} bytes), not shown")
            handle.seek(0)
            page = _read_page(handle, first, count)
        if page.total == 0:
            return _ok(f"{shown} is empty")
        if not page.lines:
            raise _Refusal(
                f"offset {first} is past the end of {shown} ({_plural(page.total, 'line')})"
            )
        return _ok(_render_page(shown, first, page))

    def _regular_file(self, target: Path, shown: str, directory_hint: str) -> os.stat_result:
        info = target.stat()
        if stat.S_ISDIR(info.st_mode):
            raise _Refusal(f"{shown} is a directory; {directory_hint}")
        if not stat.S_ISREG(info.st_mode):
            raise _Refusal(f"{shown} is not a regular file")
        return info

    # list_dir

    def _list_dir(self, path: str) -> ToolOutcome:
        target, shown = self.resolve(path), self.display(path)
        if not stat.S_ISDIR(target.stat().st_mode):
            raise _Refusal(f"{shown} is not a directory; use read_file to read a file")
        with os.scandir(target) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        if not entries:
            return _ok(f"{shown} is an empty directory")
        lines = [_entry_line(entry) for entry in entries[:MAX_LIST_ENTRIES]]
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"… {len(entries)} entries; showing the first {MAX_LIST_ENTRIES}")
        return _ok("\n".join(lines))

    # walking (glob, grep)

    def _walk_files(self, top: Path) -> Iterator[tuple[str, Path]]:
        """(path relative to top, full path) of the files under top, in a stable order.

        VCS folders and agenthost's own are skipped and symlinked folders are not
        entered (no loops, no duplicates); a symlinked file counts when its target
        is allowed."""
        stack: list[tuple[str, str]] = [(str(top), "")]
        while stack:
            folder, relative = stack.pop()
            subfolders = []
            for entry in _sorted_entries(folder):
                child = f"{relative}/{entry.name}" if relative else entry.name
                if _is_real_dir(entry):
                    walked = entry.name not in VCS_FOLDERS and entry.name != AGENTHOST_FOLDER
                    if walked and not self._is_hidden(Path(entry.path)):
                        subfolders.append((entry.path, child))
                elif self._is_visible_file(entry):
                    yield child, Path(entry.path)
            stack.extend(reversed(subfolders))

    def _is_visible_file(self, entry: os.DirEntry[str]) -> bool:
        try:
            return entry.is_file() and (not entry.is_symlink() or self._may_read(entry.path))
        except OSError:
            return False

    def _folder(self, path: str) -> Path:
        target = self.resolve(path)
        if not stat.S_ISDIR(target.stat().st_mode):
            raise _Refusal(f"{self.display(path)} is not a directory")
        return target

    # glob

    def _glob(self, pattern: str, path: str) -> ToolOutcome:
        parts = _check_glob(_text_arg("pattern", pattern), "pattern")
        top = self._folder(path)
        found = sorted(
            self._shown(full)
            for relative, full in self._walk_files(top)
            if _glob_match(tuple(relative.split("/")), parts)
        )
        if not found:
            return _ok(f"no files match {pattern!r}")
        lines = found[:MAX_GLOB_RESULTS]
        if len(found) > MAX_GLOB_RESULTS:
            lines.append(
                f"… {len(found)} files match; showing the first {MAX_GLOB_RESULTS}; "
                "narrow the pattern or path"
            )
        return _ok("\n".join(lines))

    # grep

    def _grep(
        self, pattern: str, path: str, glob: object, ignore_case: object, max_results: object
    ) -> ToolOutcome:
        regex = _compile(_text_arg("pattern", pattern), _bool_arg("ignore_case", ignore_case))
        wanted = _name_filter(None if glob is None else _text_arg("glob", glob))
        limit = min(
            _int_arg("max_results", max_results, minimum=1) or DEFAULT_GREP_RESULTS,
            MAX_GREP_RESULTS,
        )
        matches = [
            f"{shown}:{number}:{_cut(line)}"
            for shown, number, line in self._matches(path, regex, wanted, limit + 1)
        ]
        if not matches:
            return _ok("no matches")
        if len(matches) > limit:
            matches[limit:] = [
                f"… results capped at {limit} matches; narrow the pattern or path"
                + (f", or raise max_results (at most {MAX_GREP_RESULTS})" if limit < 1000 else "")
            ]
        return _ok("\n".join(matches))

    def _matches(
        self, path: str, regex: re.Pattern[str], wanted: Callable[[str], bool], limit: int
    ) -> Iterator[tuple[str, int, str]]:
        found = 0
        for shown, full in self._grep_files(path):
            if not wanted(shown):
                continue
            for number, line in enumerate(_searchable_lines(full), 1):
                if regex.search(line):
                    yield shown, number, line
                    found += 1
                    if found >= limit:
                        return

    def _grep_files(self, path: str) -> Iterator[tuple[str, Path]]:
        target = self.resolve(path)
        if stat.S_ISDIR(target.stat().st_mode):
            yield from ((self._shown(full), full) for _, full in self._walk_files(target))
            return
        shown = self.display(path)
        size = self._regular_file(target, shown, "").st_size
        if size > MAX_GREP_FILE_BYTES:
            raise _Refusal(f"{shown} is larger than 2 MiB; use read_file with offset and limit")
        with target.open("rb") as handle:
            if is_binary(handle.read(BINARY_SNIFF_BYTES)):
                raise _Refusal(f"{shown} is a binary file; grep skips binary files")
        yield shown, target

    # write_file

    def _write_file(self, path: str, content: str) -> FileEdit:
        data = _utf8("content", _text_arg("content", content))
        target = self.resolve(path, for_write=True)
        change = self._planned_write(path, content)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return FileEdit(_ok(f"wrote {change.path} (+{change.added} -{change.removed})"), change)

    def _planned_write(self, path: str, content: str) -> FileChange:
        _utf8("content", _text_arg("content", content))
        target, shown = self.resolve(path, for_write=True), self.display(path)
        old = self._previous_content(target, shown)
        return _file_change(shown, _decode(old or b"")[0], content, created=old is None)

    def _previous_content(self, target: Path, shown: str) -> bytes | None:
        try:
            found = self._regular_file(target, shown, "write_file writes files")
        except FileNotFoundError:
            return None
        if found.st_size > MAX_EDIT_FILE_BYTES:
            return b""  # too large to diff: shown as replaced whole
        return target.read_bytes()

    # edit_file

    def _edit_file(self, path: str, old: str, new: str, replace_all: object) -> FileEdit:
        shown, text, updated, count = self._planned_edit(path, old, new, replace_all)
        self.resolve(path, for_write=True).write_bytes(_utf8("new_string", updated))
        change = _file_change(shown, text, updated, created=False)
        summary = f"{_plural(count, 'replacement')} (+{change.added} -{change.removed})"
        return FileEdit(_ok(f"edited {shown}: {summary}"), change)

    def _planned_edit(
        self, path: str, old: str, new: str, replace_all: object
    ) -> tuple[str, str, str, int]:
        """The file shown, its text now, its text after the edit and the count replaced."""
        old, new = _text_arg("old_string", old), _text_arg("new_string", new)
        every = _bool_arg("replace_all", replace_all)
        _check_edit(old, new)
        target, shown = self.resolve(path, for_write=True), self.display(path)
        text = self._utf8_text(target, shown)
        old, new = _match_line_endings(text, old, new)
        count = text.count(old)
        if count == 0:
            raise _Refusal(f"old_string not found in {shown}")
        if count > 1 and not every:
            raise _Refusal(
                f"old_string occurs {count} times in {shown}; give more context or set replace_all"
            )
        updated = text.replace(old, new) if every else text.replace(old, new, 1)
        return shown, text, updated, count

    def _utf8_text(self, target: Path, shown: str) -> str:
        try:
            size = self._regular_file(target, shown, "edit_file edits files").st_size
        except FileNotFoundError:
            raise _Refusal(f"{shown} does not exist; use write_file to create it") from None
        if size > MAX_EDIT_FILE_BYTES:
            raise _Refusal(
                f"{shown} is {size} bytes; edit_file edits files up to {MAX_EDIT_FILE_BYTES} "
                "bytes (use a command, e.g. sed, for larger ones)"
            )
        data = target.read_bytes()
        if is_binary(data):
            raise _Refusal(
                f"{shown} is a binary file, not UTF-8 text; edit_file only edits UTF-8 text"
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise _Refusal(f"{shown} is not UTF-8 text; edit_file only edits UTF-8 text") from None


# --- helpers of the tools -------------------------------------------------------------


def _entry_line(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            slash = "/" if entry.is_dir() else ""
            broken = "" if os.path.exists(entry.path) else " (broken)"
            return f"{entry.name}{slash} -> {os.readlink(entry.path)} (symlink){broken}"
        return entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")
    except OSError:
        return entry.name


def _sorted_entries(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as scan:
            return sorted(scan, key=lambda entry: entry.name)
    except OSError:
        return []


def _is_real_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _compile(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except (re.error, OverflowError, RecursionError) as error:
        raise _Refusal(f"invalid regex: {error}") from None


def _name_filter(glob: str | None) -> Callable[[str], bool]:
    """Whether a file (shown relative to the root) passes grep's glob filter: a glob
    without '/' matches the file name, one with '/' the path relative to the root."""
    if glob is None:
        return lambda shown: True
    if "/" not in glob.strip("/"):
        name = glob.strip("/")
        return lambda shown: fnmatchcase(shown.rsplit("/", 1)[-1], name)
    parts = _check_glob(glob, "glob")
    return lambda shown: _glob_match(tuple(shown.split("/")), parts)


def _searchable_lines(full: Path) -> list[str]:
    """The lines grep searches; nothing for binary, huge or unreadable files."""
    try:
        if full.stat().st_size > MAX_GREP_FILE_BYTES:
            return []
        data = full.read_bytes()
    except OSError:
        return []
    return [] if is_binary(data) else _split_lines(data.decode("utf-8", "replace"))


def _cut(line: str) -> str:
    return line if len(line) <= MAX_GREP_LINE_CHARS else line[:MAX_GREP_LINE_CHARS] + "…"


def _check_edit(old: str, new: str) -> None:
    if not old:
        raise _Refusal("old_string must not be empty; use write_file to create or overwrite a file")
    if old == new:
        raise _Refusal("old_string and new_string are identical; nothing would change")
    _utf8("old_string", old)
    _utf8("new_string", new)


def _to_crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def _match_line_endings(text: str, old: str, new: str) -> tuple[str, str]:
    """Models write '\\n'; in a CRLF file, match and replace with '\\r\\n' instead."""
    if old in text or "\n" not in old or "\r\n" not in text:
        return old, new
    if _to_crlf(old) in text:
        return _to_crlf(old), _to_crlf(new)
    return old, new


# --- JSON Schemas of the tools' arguments ---------------------------------------------


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_PATH = {"type": "string", "description": "File path, relative to the session folder."}
_FOLDER = {
    "type": "string",
    "description": "Folder to search, relative to the session folder (default '.').",
}

READ_FILE_DESCRIPTION = (
    "Read a text file with line numbers (at most 2000 lines per call; use offset and limit "
    "to page)."
)
READ_FILE_PARAMETERS = _schema(
    {
        "path": _PATH,
        "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1-based)."},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_READ_LINES,
            "description": "Number of lines to show (default and maximum 2000).",
        },
    },
    ["path"],
)

LIST_DIR_DESCRIPTION = "List a folder's entries; folders end with '/', symlinks show their target."
LIST_DIR_PARAMETERS = _schema(
    {
        "path": {
            "type": "string",
            "description": "Folder, relative to the session folder (default '.').",
        }
    },
    [],
)

GLOB_DESCRIPTION = (
    "Find files by name pattern ('*.py' in one folder, '**/*.py' at any depth); paths are "
    "sorted and relative to the session folder."
)
GLOB_PARAMETERS = _schema(
    {
        "pattern": {
            "type": "string",
            "description": "Glob relative to path: '*' within a name, '**' any folders.",
        },
        "path": _FOLDER,
    },
    ["pattern"],
)

GREP_DESCRIPTION = (
    "Search file contents line by line with a Python regular expression; answers "
    "path:line:text lines."
)
GREP_PARAMETERS = _schema(
    {
        "pattern": {"type": "string", "description": "Python regular expression."},
        "path": {"type": "string", "description": "File or folder to search (default '.')."},
        "glob": {
            "type": "string",
            "description": "Only files matching this glob: a file name ('*.py') or a path "
            "relative to the session folder ('src/**/*.py').",
        },
        "ignore_case": {"type": "boolean", "description": "Match case-insensitively."},
        "max_results": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_GREP_RESULTS,
            "description": "Maximum matching lines (default 200, at most 1000).",
        },
    },
    ["pattern"],
)

WRITE_FILE_DESCRIPTION = (
    "Create or overwrite a file with the given UTF-8 text; missing folders are created."
)
WRITE_FILE_PARAMETERS = _schema(
    {"path": _PATH, "content": {"type": "string", "description": "The complete new content."}},
    ["path", "content"],
)

EDIT_FILE_DESCRIPTION = (
    "Replace an exact string in a UTF-8 text file; old_string must occur exactly once unless "
    "replace_all is true."
)
EDIT_FILE_PARAMETERS = _schema(
    {
        "path": _PATH,
        "old_string": {
            "type": "string",
            "description": "Exact text to replace, with enough context to be unique.",
        },
        "new_string": {"type": "string", "description": "Text to put in its place."},
        "replace_all": {
            "type": "boolean",
            "description": "Replace every occurrence (default false).",
        },
    },
    ["path", "old_string", "new_string"],
)
