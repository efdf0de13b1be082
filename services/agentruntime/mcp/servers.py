"""The MCP servers of the runtime, by workspace folder, and what a session's
model sees of them at a model-request boundary.

A folder's servers are connected once and shared by its sessions; the
configuration is read again at each boundary, so an added, changed or
removed entry takes effect at the next model request. `snapshot` is the
catalog's stable part: the tools of the servers ready at the boundary and
each server's state (the agent logs that state as mcp/status when it
changed). A server still making its first connection is waited for up to
its startup timeout, so the first request of a session sees its tools.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agenthost_core.folds import Approval, McpServerView
from services.common.tasks import spawn

from ..confinement import BWRAP
from ..gates import Effect
from ..tools import Args, Tool, ToolContext, ToolOutcome
from . import config
from .config import McpConfig, ServerConfig
from .state import State

if TYPE_CHECKING:
    import mcp_types as types

    from .connection import McpConnection

PREFIX = "mcp"
# Tool names the model providers accept.
UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
# A request lists at most 256 tools (RequestHeader); MCP tools get what is left.
MAX_MCP_TOOLS = 200
MAX_NAME = 128
# What a request header keeps of one tool's schema (events.proto ToolSchema).
MAX_SCHEMA_BYTES = 262144
MAX_DESCRIPTION_BYTES = 65536

# What a folder's commands must not see (the other sessions' folders). Asked
# only when a server is about to start: it reads the session log's list of
# every session, of no use to a boundary whose servers all run (or has none).
HiddenPaths = Callable[[], Awaitable[Sequence[Path]]]

log = logging.getLogger("agenthost.runtime.mcp")


def tool_name(server: str, tool: str) -> str:
    return f"{PREFIX}__{server}__{UNSAFE.sub('_', tool)}"[:MAX_NAME]


@dataclass(frozen=True)
class McpSnapshot:
    tools: tuple[Tool, ...] = ()
    servers: tuple[McpServerView, ...] = ()


class McpServers:
    def __init__(self, deployment_config: Path | None, bwrap: str = BWRAP) -> None:
        self._deployment = deployment_config
        # What confines the stdio servers (launch.py).
        self._bwrap = bwrap
        self._connections: dict[tuple[Path, ServerConfig], McpConnection] = {}

    async def snapshot(self, cwd: Path, hidden: HiddenPaths | None = None) -> McpSnapshot:
        """`hidden` gives what the folder's commands must not see, hidden
        from the stdio servers it starts too (launch.py); asked only then."""
        configured = config.load(self._deployment, cwd)
        starting = any((cwd, server) not in self._connections for server in configured.servers)
        shut = await hidden() if starting and hidden is not None else ()
        connections = self._reconcile(cwd, configured, shut)
        await self._first_attempts(connections)
        tools: list[Tool] = []
        views = [_broken_view(b) for b in configured.broken]
        for connection in connections:
            offered = _offered(connection, MAX_MCP_TOOLS - len(tools), {t.name for t in tools})
            tools += offered
            views.append(_view(connection, len(offered)))
        return McpSnapshot(tuple(tools), tuple(views))

    def _reconcile(
        self, cwd: Path, configured: McpConfig, hidden: Sequence[Path]
    ) -> list[McpConnection]:
        """The folder's connections for its configuration now: new entries
        start, entries no longer configured (or changed) stop."""
        wanted = {(cwd, server) for server in configured.servers}
        for key in [k for k in self._connections if k[0] == cwd and k not in wanted]:
            spawn(self._connections.pop(key).close(), name=f"mcp-close-{key[1].name}")
        connections = []
        for server in configured.servers:
            connection = self._connections.get((cwd, server))
            if connection is None:
                # The MCP SDK loads with the first server configured, not at start.
                from .connection import McpConnection

                connection = McpConnection(server, cwd, hidden, self._bwrap)
                self._connections[(cwd, server)] = connection
                connection.start()
            connections.append(connection)
        return connections

    async def _first_attempts(self, connections: list[McpConnection]) -> None:
        """Wait (bounded) for first connections and for tool lists a server
        announced as changed, so a change made by the last step's calls
        shows at this boundary."""

        async def settled(connection: McpConnection) -> None:
            try:
                async with asyncio.timeout(connection.config.startup_timeout_s):
                    await connection.first_settled()
                    await connection.tools_listed()
            except TimeoutError:
                pass  # shown as it is; its tools come at a later boundary

        await asyncio.gather(*(settled(c) for c in connections))

    async def wait_for(self, cwd: Path, name: str, state: State) -> None:
        """Wait until the folder's server `name` is in `state` (callers bound it)."""
        for (folder, server), connection in self._connections.items():
            if folder == cwd and server.name == name:
                await connection.wait_for(state)
                return
        raise KeyError(f"no MCP server {name!r} is connected for {cwd}")

    async def close(self) -> None:
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections))


def _offered(connection: McpConnection, room: int, taken: set[str]) -> list[Tool]:
    """A ready server's tools the request has room for: a name already
    taken (names are made safe, so two can meet) or a schema larger than
    the log keeps is left out, with a warning."""
    if connection.state.state is not State.READY:
        return []
    offered: list[Tool] = []
    for listed in connection.state.tools:
        tool = mcp_tool(connection, listed)
        if tool is None or tool.name in taken or len(offered) >= room:
            log.warning("MCP server %s: tool %r not offered", connection.name, listed.name)
            continue
        taken.add(tool.name)
        offered.append(tool)
    return offered


def mcp_tool(connection: McpConnection, tool: types.Tool) -> Tool | None:
    """The tool as the model is offered it; None when its schema is too large."""
    server = connection.name
    name = tool_name(server, tool.name)
    if len(json.dumps(tool.input_schema, sort_keys=True).encode()) > MAX_SCHEMA_BYTES:
        return None

    async def run(context: ToolContext, args: Args) -> ToolOutcome:
        return await connection.call(tool.name, args)

    def describe(args: Args) -> Approval:
        shown = json.dumps(args, ensure_ascii=False, sort_keys=True)
        summary = f"{tool.name} on MCP server {server} {shown}"[:200]
        transport = connection.config.transport
        detail = f"MCP server {server!r} ({transport}), tool {tool.name!r}\n{shown}"
        return Approval(name, summary, detail, name)

    return Tool(
        name=name,
        description=_bounded(tool.description or tool.title or tool.name, MAX_DESCRIPTION_BYTES),
        parameters=tool.input_schema,
        run=run,
        # A server runs code of its own: asked for like a command, refused
        # by the read-only sandbox.
        effect=Effect.COMMAND,
        describe=describe,
    )


def _bounded(text: str, limit: int) -> str:
    return text.encode()[:limit].decode(errors="ignore")


def _view(connection: McpConnection, tools: int) -> McpServerView:
    state = connection.state
    return McpServerView(
        name=connection.name,
        state=state.state.value,
        transport=connection.config.transport,
        tools=tools if state.state is State.READY else 0,
        error=state.error,
        scope=connection.config.scope,
    )


def _broken_view(broken: config.BrokenConfig) -> McpServerView:
    return McpServerView(
        name=f"{broken.scope}-config",
        state=State.FAILED.value,
        error=broken.error,
        scope=broken.scope,
    )
