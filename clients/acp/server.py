"""`agenthost acp`: serve one editor on stdin/stdout until it closes them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

from acp import PROTOCOL_VERSION
from acp.agent.connection import AgentSideConnection
from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
from acp.interfaces import Agent, Client
from acp.stdio import stdio_streams
from acp.task import MessageSender, TaskSupervisor

from clients.cli.config import tls_roots
from clients.sdk import AgentHostClient, AgentHostError

from .agent import serving
from .stack import StackUnavailable, gateway_for, say
from .transport import CheckedTransport

__all__ = ["PROTOCOL_VERSION", "serve"]


async def _serve(address: str | None, token: str | None, data_dir: Path) -> None:
    gateway = await gateway_for(address, token, data_dir)
    client = AgentHostClient(gateway.address, gateway.token, tls_roots=tls_roots())
    try:
        reader, writer = await stdio_streams(limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
        # The protocol owns stdout now: a stray print goes to stderr instead.
        sys.stdout = sys.stderr
        tasks = TaskSupervisor(source="agenthost.acp")
        transport = CheckedTransport(reader, MessageSender(writer, tasks))
        async with serving(client) as make_agent:
            # The agent implements the protocol's stable methods (the rest
            # answer -32601 Method not found).
            agent = cast(Callable[[Client], Agent], make_agent)
            conn = AgentSideConnection(agent, transport, listening=False)
            try:
                await conn.listen()
            finally:
                await conn.close()  # requests in flight end with the editor
        await tasks.shutdown()
    finally:
        await client.close()


async def _serve_until_stopped(address: str | None, token: str | None, data_dir: Path) -> None:
    """Serve; SIGTERM (how editors often end their agents) and SIGHUP end it
    like a closed stdin: requests in flight are ended, the gateway's
    connection closed."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    for stop in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(stop, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await _serve(address, token, data_dir)


def serve(address: str | None, token: str | None, data_dir: Path) -> int:
    """Serve until the editor closes stdin; the exit code."""
    # Logs go to stderr: stdout carries the protocol.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        asyncio.run(_serve_until_stopped(address, token, data_dir))
    except KeyboardInterrupt:
        return 130
    except StackUnavailable as error:
        say(f"error: {error}")
        return 1
    except AgentHostError as error:
        say(f"error: {error.message} ({error.reason or error.code})")
        return 1
    return 0
