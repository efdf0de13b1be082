"""How a stdio MCP server's process is started.

`stdio_launch` is the one place its command line is made. A server runs
code of its own, so it runs confined by bubblewrap like a command of a
`workspace-write` session in its folder (confinement.py): the folder
writable, the rest read-only, a private /tmp, the stack's data directory,
tokens and other sessions' folders hidden, the process limit, and no
network unless its entry says `"network": true`. `"sandbox": "full"` runs it
unconfined. Where it cannot be confined it is not started (ServerUnconfinable).
The folders under /tmp its command line names (its own code, a virtualenv
it runs from) stay readable through the private /tmp.

The hidden paths are those of the server's start: a session made later in
another folder is hidden from the server once it restarts (its entry
changed, it failed, or the runtime restarted).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..confinement import BWRAP, Jail, Prepared, Unconfinable, prepare
from ..gates import WORKSPACE_WRITE
from .config import UNCONFINED, ServerConfig

# What the jail mounts a tmpfs of its own over.
PRIVATE_TMP = Path("/tmp")


class ServerUnconfinable(Exception):
    """The server cannot be confined here: not started, and how to fix it."""

    def __init__(self, problem: Unconfinable) -> None:
        super().__init__(
            f"not started: it cannot be confined on this machine ({problem.reason}): "
            f'{problem.message}. Its entry in mcp.json may say "sandbox": "full" '
            "to run it unconfined"
        )
        self.problem = problem


def stdio_launch(
    server: ServerConfig, cwd: Path, hidden: Sequence[Path] = (), bwrap: str = BWRAP
) -> Prepared:
    """How to spawn the server in the session's folder (its argv, and the
    cgroup to remove once it stopped); raises ServerUnconfinable."""
    program = [server.command, *server.args]
    if server.sandbox == UNCONFINED:
        return Prepared(program)
    jail = Jail(
        WORKSPACE_WRITE,
        cwd,
        network=server.network,
        hidden=tuple(hidden),
        shown=own_folders_in_tmp(program),
    )
    prepared = prepare(jail, program, bwrap)
    if prepared.refused is not None:
        raise ServerUnconfinable(prepared.refused)
    return prepared


def own_folders_in_tmp(program: Sequence[str]) -> tuple[Path, ...]:
    """The top folders under /tmp that the command line names as existing
    paths: the jail's private /tmp would hide the server's own files."""
    roots: set[Path] = set()
    for item in program:
        path = Path(item)
        if path.is_absolute() and path.exists() and path.is_relative_to(PRIVATE_TMP):
            parts = path.relative_to(PRIVATE_TMP).parts
            if parts:
                roots.add(PRIVATE_TMP / parts[0])
    return tuple(sorted(roots))


def stdio_environment(server: ServerConfig) -> dict[str, str]:
    """The SDK's safe inherited variables (PATH, HOME, ...; no secrets of the
    runtime's) and the entry's own. The SDK is imported here, when a stdio
    server starts: the hooks import this module at start, and need no SDK."""
    from mcp.client.stdio import get_default_environment

    return get_default_environment() | dict(server.env)
