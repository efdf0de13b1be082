"""How a stdio MCP server's process is started.

`stdio_command` is the one place its command line is made: confinement of
the server (the same bubblewrap wrapping as the shell's commands, see
shell.py) wraps the command line it returns, so the server then runs under
the same limits as the agent's commands in that folder.
"""

from __future__ import annotations

from pathlib import Path

from mcp.client.stdio import get_default_environment

from .config import ServerConfig


def stdio_command(server: ServerConfig, cwd: Path) -> list[str]:
    """The command line a stdio server runs as, in the session's folder.
    Confinement plugs in here: return the wrapped command line."""
    return [server.command, *server.args]


def stdio_environment(server: ServerConfig) -> dict[str, str]:
    """The SDK's safe inherited variables (PATH, HOME, ...; no secrets of the
    runtime's) and the entry's own."""
    return get_default_environment() | dict(server.env)
