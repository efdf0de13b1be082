"""Canonical workspace paths: one spelling per directory, and only folders.

Two spellings of one directory (a symlink, a trailing slash, `..`) must land
in the same workspace, and a session's cwd is compared with the workspace
path as a string, so both sides go through `canonical_path`.

A workspace is where an agent reads, writes and runs commands, so its path
must name a directory that exists where the services run (`workspace_path`):
not a path that does not exist, not a file, and not `/` (the whole machine
is never a project). The check holds when the workspace is made; a folder
deleted later is the tools' problem (they answer that it is missing).
"""

from __future__ import annotations

import os
import stat

from .errors import InvalidWorkspacePath

# What a session's cwd may hold (the absolute_path rule of the protos).
MAX_PATH_BYTES = 4096


def canonical_path(path: str) -> str:
    """Absolute, symlinks resolved, `.`/`..` and repeated or trailing slashes
    removed. The directory need not exist: the parts that exist are resolved
    and the rest is kept as written (normalised)."""
    if not path:
        raise InvalidWorkspacePath(path, "is empty")
    if "\0" in path:
        raise InvalidWorkspacePath(path, "contains a NUL character")
    if not os.path.isabs(path):
        # Relative to what? The service's own working directory means nothing
        # to a client, so we refuse rather than guess.
        raise InvalidWorkspacePath(path, "is relative; an absolute path is required")
    canonical = os.path.realpath(path)
    # A symlink may resolve to more than a session's cwd can hold (the session
    # log's limit): refused here, before any workspace or member is written.
    try:
        size = len(canonical.encode())
    except UnicodeEncodeError:
        raise InvalidWorkspacePath(path, "resolves to a name that is not UTF-8") from None
    if size > MAX_PATH_BYTES:
        raise InvalidWorkspacePath(path, f"resolves to more than {MAX_PATH_BYTES} bytes")
    return canonical


def workspace_path(path: str) -> str:
    """The canonical path of an existing directory other than `/`, else
    INVALID_WORKSPACE_PATH saying which of those it is not."""
    canonical = canonical_path(path)
    if canonical == "/":
        raise InvalidWorkspacePath(path, "is the root of the file system; choose a project folder")
    try:
        mode = os.stat(canonical).st_mode
    except PermissionError:
        raise InvalidWorkspacePath(path, "cannot be read by agenthost") from None
    except OSError:
        # Missing, a file where a folder is expected, a name too long...
        raise InvalidWorkspacePath(path, "does not exist") from None
    if not stat.S_ISDIR(mode):
        raise InvalidWorkspacePath(path, "is not a directory")
    return canonical
