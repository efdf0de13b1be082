"""Canonical workspace paths: one spelling per directory.

Two spellings of one directory (a symlink, a trailing slash, `..`) must land
in the same workspace, and a session's cwd is compared with the workspace
path as a string, so both sides go through this one function.
"""

from __future__ import annotations

import os

from .errors import InvalidWorkspacePath


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
    return os.path.realpath(path)
