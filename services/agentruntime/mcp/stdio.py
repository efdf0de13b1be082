"""The stdio transport: the server's process, and newline-delimited JSON-RPC
over its stdin and stdout, as the SDK's ClientSession expects it.

Ours rather than the SDK's stdio_client for two reasons: one message is
bounded (a line over MAX_MESSAGE_BYTES is skipped as it streams in, in
linear time, and reported to the session as MessageTooLarge, so a 50 MB
result costs its call and not the connection or minutes of CPU), and the
command line comes from launch.stdio_launch (confined there).
The process runs in its own process group: closing the transport closes
its stdin, then signals the whole group, then kills it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

import anyio
import mcp_types as types
from anyio.abc import Process
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

# The largest message taken from a server (a tool result, a tool list).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
READ_CHUNK = 1 << 16
# After stdin closes, the server's time to exit; then SIGTERM, then SIGKILL.
EXIT_GRACE_S = 2.0


class MessageTooLarge(Exception):
    """The server sent a message larger than MAX_MESSAGE_BYTES (skipped)."""


@contextlib.asynccontextmanager
async def stdio_transport(
    argv: list[str], cwd: Path, env: dict[str, str], stderr: IO[str]
) -> AsyncIterator[TransportStreams]:
    process = await anyio.open_process(
        argv, cwd=cwd, env=env, stderr=stderr, start_new_session=True
    )
    to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as pipes:
        pipes.start_soon(_read_stdout, process, to_session)
        pipes.start_soon(_write_stdin, process, from_session)
        try:
            yield read, write
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
            pipes.cancel_scope.cancel()
            for stream in (read, write, to_session, from_session):
                await stream.aclose()


async def _read_stdout(
    process: Process, to_session: anyio.abc.ObjectSendStream[SessionMessage | Exception]
) -> None:
    assert process.stdout is not None
    buffer = bytearray()
    skipping = False
    async with to_session:
        with contextlib.suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            while True:
                chunk = await process.stdout.receive(READ_CHUNK)
                while chunk:
                    line, newline, chunk = chunk.partition(b"\n")
                    if not skipping:
                        buffer += line
                    if not newline:
                        if not skipping and len(buffer) > MAX_MESSAGE_BYTES:
                            skipping = True
                            buffer.clear()
                            await to_session.send(MessageTooLarge(_too_large()))
                        break
                    if not skipping and buffer.strip():
                        await to_session.send(_parse(bytes(buffer)))
                    buffer.clear()
                    skipping = False


def _too_large() -> str:
    return f"a message larger than {MAX_MESSAGE_BYTES // (1024 * 1024)} MB"


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        return error


async def _write_stdin(
    process: Process, from_session: anyio.abc.ObjectReceiveStream[SessionMessage]
) -> None:
    assert process.stdin is not None
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        async with from_session:
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(data.encode() + b"\n")


async def _stop(process: Process) -> None:
    """Close stdin and give the server a moment, then stop its whole group."""
    assert process.stdin is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    for signum in (None, signal.SIGTERM, signal.SIGKILL):
        if signum is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signum)
        with anyio.move_on_after(EXIT_GRACE_S):
            await process.wait()
            break
    with contextlib.suppress(OSError), anyio.move_on_after(EXIT_GRACE_S):
        await process.aclose()
