"""One MCP server, connected for one workspace folder: started (stdio) or
reached (streamable HTTP) with the official SDK, its tools listed, kept
connected by a supervising task that retries a failed or lost server with
backoff, and its tool calls bounded so a bad server costs at most that call.

The state is what the server looks like now (connecting, ready with its
tools, failed with the reason until a retry gets it ready); the agent
snapshots it at a model-request boundary only (see servers.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from services.common.tasks import spawn

from ..confinement import BWRAP
from ..tools import ToolOutcome
from .config import HTTP, ServerConfig
from .launch import ServerUnconfinable, stdio_environment, stdio_launch
from .results import outcome_of
from .state import ServerState, State
from .stdio import MessageTooLarge, stdio_transport

log = logging.getLogger("agenthost.runtime.mcp")

# Pauses before connecting a failed or lost server again (doubling).
BACKOFF_S = (0.5, 30.0)
# Extra wait past the SDK's own request timeout before a call is given up.
CALL_GRACE_S = 2.0
# How much of a failed stdio server's stderr its reason quotes.
STDERR_TAIL = 500


class _ConnectionLost(Exception):
    """The server's side of the connection ended (it exited, or hung up)."""


class _Garbled(Exception):
    """The server sent something that is not a JSON-RPC message."""


class McpConnection:
    def __init__(
        self, config: ServerConfig, cwd: Path, hidden: Sequence[Path] = (), bwrap: str = BWRAP
    ) -> None:
        self.config = config
        self.cwd = cwd
        # What a confined stdio server must not see, and what confines it (launch.py).
        self.hidden = tuple(hidden)
        self._bwrap = bwrap
        self._state = ServerState(State.CONNECTING)
        self._session: ClientSession | None = None
        # Set once the first attempt has ended (ready or failed).
        self._settled = asyncio.Event()
        self._lost = asyncio.Event()
        self._relist = asyncio.Event()
        self._calls: set[asyncio.Task[Any]] = set()
        # Calls failed by a message that answers no request we can name.
        self._garbled: dict[asyncio.Task[Any], str] = {}
        self._task: asyncio.Task[None] | None = None
        # The end of a stdio server's stderr once its process has stopped.
        self._stderr_tail = ""
        # Clear while an announced tool list is being fetched.
        self._listed = asyncio.Event()
        self._listed.set()
        self._changes = asyncio.Condition()

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def state(self) -> ServerState:
        return self._state

    @state.setter
    def state(self, state: ServerState) -> None:
        self._state = state
        spawn(self._announce(), name=f"mcp-state-{self.name}")

    async def _announce(self) -> None:
        async with self._changes:
            self._changes.notify_all()

    async def wait_for(self, wanted: State) -> ServerState:
        """The state once it is `wanted` (callers bound the wait)."""
        async with self._changes:
            await self._changes.wait_for(lambda: self._state.state is wanted)
            return self._state

    async def tools_listed(self) -> None:
        """Wait for a tool list the server announced as changed."""
        await self._listed.wait()

    def start(self) -> None:
        if self._task is None:
            self._task = spawn(self._supervise(), name=f"mcp-{self.name}")

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait([self._task])

    async def first_settled(self) -> None:
        """Wait until the first connection attempt has ended."""
        await self._settled.wait()

    # -- the connection's life ----------------------------------------------------

    async def _supervise(self) -> None:
        delay = BACKOFF_S[0]
        while True:
            if self.state.state is not State.FAILED:
                # A failed server stays failed (its reason, retrying) until a
                # retry succeeds: a model request between two attempts shows
                # the failure, not a moment of "connecting".
                self.state = ServerState(State.CONNECTING)
            try:
                await self._connect_and_serve()
                reason = "the server closed the connection"
            except Exception as error:
                reason = _describe(error)
            reason = self._with_stderr(reason)
            was_ready = self.state.state is State.READY
            self.state = ServerState(State.FAILED, error=reason)
            self._settled.set()
            log.warning("MCP server %s failed: %s", self.name, reason)
            delay = BACKOFF_S[0] if was_ready else delay
            await asyncio.sleep(delay)  # backoff before trying again, not synchronisation
            delay = min(delay * 2, BACKOFF_S[1])

    async def _connect_and_serve(self) -> None:
        self._lost.clear()
        self._relist.clear()
        self._listed.set()
        async with self._transport() as (read, write), anyio.create_task_group() as relays:
            relayed, relay_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            relays.start_soon(self._relay, read, relayed)
            session = ClientSession(relay_read, write, message_handler=self._on_message)
            try:
                async with session:
                    async with asyncio.timeout(self.config.startup_timeout_s):
                        await session.initialize()
                        tools = await _list_tools(session)
                    self._session = session
                    self.state = ServerState(State.READY, tools)
                    self._settled.set()
                    await self._serve(session)
            finally:
                self._session = None
                relays.cancel_scope.cancel()

    async def _serve(self, session: ClientSession) -> None:
        """Keep the tool list current until the connection is lost."""
        while True:
            lost = asyncio.ensure_future(self._lost.wait())
            relist = asyncio.ensure_future(self._relist.wait())
            try:
                await asyncio.wait([lost, relist], return_when=asyncio.FIRST_COMPLETED)
            finally:
                lost.cancel()
                relist.cancel()
            if self._lost.is_set():
                raise _ConnectionLost("the server closed the connection")
            self._relist.clear()
            try:
                async with asyncio.timeout(self.config.startup_timeout_s):
                    tools = await _list_tools(session)
                self.state = ServerState(State.READY, tools)
            finally:
                self._listed.set()

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[TransportStreams]:
        if self.config.transport == HTTP:
            async with streamable_http_client(self.config.url) as streams:
                yield streams
            return
        self._stderr_tail = ""
        launch = stdio_launch(self.config, self.cwd, self.hidden, self._bwrap)
        env = stdio_environment(self.config)
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stderr:
            try:
                async with stdio_transport(launch.argv, self.cwd, env, stderr) as streams:
                    yield streams
            finally:
                # The process limit's cgroup (a root runtime's) goes with it.
                launch.cleanup_soon()
                # What the server said last is often why it failed.
                stderr.seek(max(0, stderr.seek(0, os.SEEK_END) - STDERR_TAIL * 4))
                self._stderr_tail = stderr.read()[-STDERR_TAIL:].strip()

    async def _relay(
        self,
        read: Any,
        relayed: anyio.abc.ObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """Pass the server's messages on, and notice when they end."""
        async with relayed:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for item in read:
                    await relayed.send(item)
        self._lost.set()
        for call in list(self._calls):
            call.cancel()

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            # A line that is not JSON-RPC, or too large to read, answers no
            # request we can name: every call under way on this server fails
            # now, not at its timeout.
            log.warning("MCP server %s sent an unreadable message: %s", self.name, message)
            reason = (
                f"sent {message}"
                if isinstance(message, MessageTooLarge)
                else "sent a message that is not valid JSON-RPC"
            )
            for call in list(self._calls):
                self._garbled[call] = reason
                call.cancel()
        elif isinstance(message, types.ToolListChangedNotification):
            self._listed.clear()
            self._relist.set()

    def _with_stderr(self, reason: str) -> str:
        tail = self._stderr_tail
        return f"{reason}; its stderr ends: {tail}" if tail else reason

    # -- tool calls -----------------------------------------------------------------

    async def call(self, tool: str, args: dict[str, Any]) -> ToolOutcome:
        """Call a tool; whatever the server does, the answer is an outcome
        within the server's call timeout (and a little grace)."""
        session = self._session
        if session is None:
            return ToolOutcome(False, error=f"{self._where()} is not connected: {self._why()}")
        timeout = self.config.call_timeout_s
        task = asyncio.ensure_future(session.call_tool(tool, args, read_timeout_seconds=timeout))
        self._calls.add(task)
        try:
            async with asyncio.timeout(timeout + CALL_GRACE_S):
                return outcome_of(await asyncio.shield(task), f"{self.name}/{tool}")
        except TimeoutError:
            return self._failed(f"gave no answer within {timeout:g} s")
        except asyncio.CancelledError:
            if not task.done() or asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
            if task in self._garbled:
                return self._failed(self._garbled[task])
            return self._failed("closed the connection during the call (it exited or crashed)")
        except MCPError as error:
            return self._failed(_mcp_error(error, timeout))
        except Exception as error:
            return self._failed(_describe(error))
        finally:
            self._calls.discard(task)
            self._garbled.pop(task, None)
            if not task.done():
                task.cancel()

    def _failed(self, what: str) -> ToolOutcome:
        return ToolOutcome(False, error=f"{self._where()} {what}")

    def _where(self) -> str:
        return f"MCP server {self.name!r}"

    def _why(self) -> str:
        return self.state.error or self.state.state.value


async def _list_tools(session: ClientSession) -> tuple[types.Tool, ...]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tuple(tools)


def _mcp_error(error: MCPError, timeout: float) -> str:
    code = error.code
    if code == types.CONNECTION_CLOSED:
        return "closed the connection during the call (it exited or crashed)"
    if code == types.REQUEST_TIMEOUT:
        return f"gave no answer within {timeout:g} s"
    return f"answered with error {code}: {error.message}"


def _describe(error: BaseException) -> str:
    """One line for the first real failure inside (task groups wrap them)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, _ConnectionLost | ServerUnconfinable):
        return str(error)
    if isinstance(error, TimeoutError):
        return "did not start, connect or list its tools in time"
    if isinstance(error, MCPError):
        return f"error {error.code}: {error.message}"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
