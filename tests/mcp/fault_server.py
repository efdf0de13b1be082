"""A small MCP server (the SDK's MCPServer, formerly FastMCP) whose tools
misbehave on purpose, for the runtime's fault tests: run over stdio as
`python -m tests.mcp.fault_server`.

- `ok(text)` answers at once; `crash()` exits the process mid-call;
  `hang()` and `never_answers()` never answer (one sleeps, one swallows the
  request); `invalid_json()` writes a line that is not JSON-RPC;
  `huge(megabytes)` returns that many MB of text; `add_tool(name)` adds a
  tool and announces the changed list.
- `write_file(path, text)`, `read_file(path)`, `list_dir(path)` and
  `connect(port)` (to 127.0.0.1) try what a confined server may or may not
  do, answering "ok: ..." or "failed: <error>" (tests of its confinement).
"""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("faults")
# The pipe to the client, kept before the SDK diverts fd 1 away from it.
CLIENT_PIPE = os.dup(1)


@server.tool()
def ok(text: str) -> str:
    """Answer with the text."""
    return f"ok: {text}"


@server.tool()
def crash() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(3)


@server.tool()
async def hang() -> str:
    """Never answer."""
    await asyncio.Event().wait()
    return "unreachable"


@server.tool()
async def never_answers() -> str:
    """Sleep for an hour: an answer that comes far too late."""
    await asyncio.sleep(3600)
    return "too late"


@server.tool()
async def invalid_json() -> str:
    """Write a line that is not JSON-RPC, then never answer."""
    os.write(CLIENT_PIPE, b"this is {not json\n")
    await asyncio.Event().wait()
    return "unreachable"


@server.tool()
def huge(megabytes: int) -> str:
    """Return `megabytes` MB of text."""
    return "x" * (megabytes * 1024 * 1024)


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool called `name` and tell the client the list changed."""

    def added() -> str:
        return f"{name} was added"

    server.add_tool(added, name=name, description=f"added at run time: {name}")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
def write_file(path: str, text: str) -> str:
    """Write `text` to the file at `path`."""
    try:
        Path(path).write_text(text)
    except OSError as error:
        return f"failed: {error}"
    return f"ok: wrote {path}"


@server.tool()
def read_file(path: str) -> str:
    """The file's text."""
    try:
        return f"ok: {Path(path).read_text()}"
    except OSError as error:
        return f"failed: {error}"


@server.tool()
def list_dir(path: str) -> str:
    """The names in a folder."""
    try:
        return f"ok: {sorted(p.name for p in Path(path).iterdir())}"
    except OSError as error:
        return f"failed: {error}"


@server.tool()
def connect(port: int) -> str:
    """Open a TCP connection to 127.0.0.1:`port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return f"ok: connected to {port}"
    except OSError as error:
        return f"failed: {error}"


if __name__ == "__main__":
    server.run("stdio")
