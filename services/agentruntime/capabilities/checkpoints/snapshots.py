"""Snapshots of a session's folder in a shadow git repository: git with a
GIT_DIR of its own in the stack's data folder (hidden from commands like the
rest of it) and the folder as its work tree, as opencode and Codex do. The
folder's own .git, if any, is never touched.

A snapshot is a tree object: `git add -A` then `git write-tree`. The shadow
index keeps the files' stat data, so a snapshot of a large folder with one
changed file hashes that one file (about a `git status`). Left out, as the
folder's own git would leave them out: what its .gitignore files ignore,
agenthost's spilled outputs, nested repositories' contents, and any file
over MAX_FILE_BYTES (a model weight, a database dump: slow to hash, and no
turn's edit to undo).

Restoring writes files from a tree through a throwaway index
(`checkout-index`), so contents, the executable bit and symlinks come back
as they were; a path absent from the tree is removed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 10 * 1024 * 1024
# What the shadow repository never records, beside the folder's .gitignore.
EXCLUDES = (".agenthost/spill/", ".git/")
GIT = "git"
# git's empty tree: a folder with nothing to record.
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class SnapshotError(Exception):
    """git failed; the message says how."""


@dataclass(frozen=True)
class Change:
    path: str
    change: str  # "added", "modified", "deleted"
    lines_added: int = 0
    lines_removed: int = 0
    binary: bool = False


def shadow_dir(root: Path, folder: Path) -> Path:
    """The shadow repository of `folder` under `root` (one per folder)."""
    key = hashlib.sha256(str(folder).encode()).hexdigest()[:24]
    return root / key


class ShadowRepo:
    """Snapshots of one folder; calls on one repository run one at a time."""

    def __init__(self, git_dir: Path, work_tree: Path) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree
        self._lock = asyncio.Lock()
        # The tree the index held when written last, with the index file's
        # stat then: while neither the folder nor the index changed since,
        # a snapshot is that tree again without running write-tree.
        self._written: tuple[tuple[int, int, int], str] | None = None

    async def _git(
        self, *args: str, index: Path | None = None, stdin: bytes | None = None
    ) -> bytes:
        env = {
            **os.environ,
            # The user's own git settings must not change what is recorded.
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
        }
        if args[0] != "init":
            env |= {"GIT_DIR": str(self.git_dir), "GIT_WORK_TREE": str(self.work_tree)}
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        process = await asyncio.create_subprocess_exec(
            GIT,
            *args,
            cwd=self.work_tree,
            env=env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate(stdin)
        if process.returncode != 0:
            raise SnapshotError(f"git {args[0]} failed: {err.decode(errors='replace').strip()}")
        return out

    async def _ensure(self) -> None:
        if (self.git_dir / "HEAD").exists():
            return
        self.git_dir.mkdir(parents=True, exist_ok=True)
        await self._git("init", "--quiet", "--bare", str(self.git_dir))
        for key, value in (
            ("core.bare", "false"),
            ("gc.auto", "0"),
            ("core.autocrlf", "false"),
            ("core.symlinks", "true"),
            ("core.quotepath", "false"),
        ):
            await self._git("config", key, value)
        (self.git_dir / "info").mkdir(exist_ok=True)
        (self.git_dir / "info" / "exclude").write_text("\n".join(EXCLUDES) + "\n")

    async def snapshot(self) -> str:
        """The folder's tree as it is now."""
        async with self._lock:
            await self._ensure()
            changed = await self._changed()
            if changed:
                listed = b"\0".join(name.encode(errors="surrogateescape") for name in changed)
                await self._git(
                    "add", "--all", "--pathspec-from-file=-", "--pathspec-file-nul", stdin=listed
                )
            elif self._written is not None and self._written[0] == self._index_stamp():
                return self._written[1]
            tree = (await self._git("write-tree")).decode().strip()
            self._written = (self._index_stamp(), tree)
            return tree

    def _index_stamp(self) -> tuple[int, int, int]:
        """The index file's identity: git replaces the file on every write (so
        another process's `add` shows here too)."""
        try:
            found = (self.git_dir / "index").stat()
        except FileNotFoundError:
            return (0, 0, 0)  # nothing added yet: the empty tree
        return (found.st_ino, found.st_mtime_ns, found.st_size)

    async def _changed(self) -> list[str]:
        """What differs from the last snapshot: new, changed and deleted
        files, but those over MAX_FILE_BYTES. One pass that stats each file
        against the index (no hashing but of what changed), so `add` is
        given these paths only, not the whole folder to walk again."""
        listed = await self._git("ls-files", "-z", "--others", "--modified", "--exclude-standard")
        changed = []
        for name in dict.fromkeys(listed.decode(errors="surrogateescape").split("\0")):
            path = self.work_tree / name
            regular = name and path.is_file() and not path.is_symlink()
            if name and not (regular and path.stat().st_size > MAX_FILE_BYTES):
                changed.append(name)
        return changed

    async def changes(self, before: str, after: str) -> list[Change]:
        """The files that differ between two snapshots, with line counts."""
        if before == after:
            return []
        async with self._lock:
            status = await self._git(
                "diff-tree", "-r", "-z", "--no-renames", "--name-status", before, after
            )
            counts = await self._git(
                "diff-tree", "-r", "-z", "--no-renames", "--numstat", before, after
            )
        kinds = {"A": "added", "M": "modified", "D": "deleted", "T": "modified"}
        parts = status.decode(errors="surrogateescape").split("\0")
        changed = {
            parts[i + 1]: kinds.get(parts[i][:1], "modified")
            for i in range(0, len(parts) - 1, 2)
            if parts[i]
        }
        lines = _numstat(counts.decode(errors="surrogateescape"))
        return [
            Change(path, kind, *lines.get(path, (0, 0, False)))
            for path, kind in sorted(changed.items())
        ]

    async def diff(self, before: str, after: str) -> bytes:
        """The unified diff between two snapshots (binary files named only)."""
        async with self._lock:
            return await self._git(
                "diff-tree", "-r", "-p", "--no-renames", "--no-color", before, after
            )

    async def blobs(self, tree: str, paths: Sequence[str]) -> dict[str, str]:
        """The blob id (with its mode) of each of `paths` in `tree`; absent
        paths are left out."""
        if not paths:
            return {}
        async with self._lock:
            out = await self._git("ls-tree", "-z", tree, "--", *paths)
        found = {}
        for entry in out.decode(errors="surrogateescape").split("\0"):
            if entry:
                meta, path = entry.split("\t", 1)
                mode, _, blob = meta.split()
                found[path] = f"{mode} {blob}"
        return found

    async def current(self, paths: Sequence[str]) -> dict[str, str]:
        """The blob id (with its mode) each of `paths` has on disk now; absent
        paths are left out."""
        async with self._lock:
            found = {}
            for path in paths:
                full = self.work_tree / path
                if not (full.is_symlink() or full.is_file()):
                    continue
                if full.is_symlink():
                    data, mode = os.readlink(full).encode(errors="surrogateescape"), "120000"
                else:
                    data = full.read_bytes()
                    mode = "100755" if full.stat().st_mode & stat.S_IXUSR else "100644"
                blob = await self._git("hash-object", "--stdin", stdin=data)
                found[path] = f"{mode} {blob.decode().strip()}"
            return found

    async def restore(self, tree: str, paths: Sequence[str]) -> None:
        """Make each of `paths` as it is in `tree` (removed when absent)."""
        if not paths:
            return
        present = await self.blobs(tree, paths)
        async with self._lock:
            for path in paths:
                if path not in present:
                    full = self.work_tree / path
                    if full.is_symlink() or full.is_file():
                        full.unlink()
            if present:
                index = self.git_dir / f"restore-{os.getpid()}.index"
                try:
                    await self._git("read-tree", tree, index=index)
                    await self._git("checkout-index", "-f", "--", *present, index=index)
                finally:
                    index.unlink(missing_ok=True)


def _numstat(text: str) -> dict[str, tuple[int, int, bool]]:
    """`git diff --numstat -z`: added, removed (or "-" for binary), path."""
    found = {}
    for record in text.split("\0"):
        fields = record.split("\t", 2)
        if len(fields) == 3:
            added, removed, path = fields
            binary = added == "-"
            found[path] = (0 if binary else int(added), 0 if binary else int(removed), binary)
    return found
