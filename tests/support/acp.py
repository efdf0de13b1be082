"""An editor that writes Agent Client Protocol lines itself, for tests of
`agenthost acp` that need raw lines (bad input) or Python beside it
(tests/acp drives it with the official client library)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from tests.support.hosts import REPO

WITHIN_S = 30
Message = dict[str, Any]


class RawEditor:
    """An `agenthost acp` process and the messages it sent, read as they come."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.messages: list[Message] = []
        self._arrived = asyncio.Event()
        self._next_id = 100
        self.stderr = ""
        # stdout lines that are no JSON-RPC message (there must be none).
        self.not_protocol: list[str] = []
        self._reader = asyncio.create_task(self._read())
        self._errors = asyncio.create_task(self._read_stderr())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            try:
                self.messages.append(json.loads(line))
            except ValueError:
                self.not_protocol.append(line.decode(errors="replace"))
            self._arrived.set()

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        async for line in self.process.stderr:
            self.stderr += line.decode(errors="replace")

    async def wait_for(self, predicate: Callable[[Message], bool]) -> Message:
        async with asyncio.timeout(WITHIN_S):
            while True:
                for message in self.messages:
                    if predicate(message):
                        return message
                self._arrived.clear()
                await self._arrived.wait()

    async def write(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()

    async def send(self, method: str, params: Any) -> int:
        """Send a request; its id, for `response`."""
        self._next_id += 1
        request = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        await self.write(json.dumps(request))
        return self._next_id

    async def response(self, request_id: int) -> Message:
        """The response (result or error) to a request sent."""
        return await self.wait_for(lambda m: m.get("id") == request_id and "method" not in m)

    async def call(self, method: str, params: Any) -> Message:
        """The response (result or error) to one request."""
        return await self.response(await self.send(method, params))

    async def respond(self, request: Message, result: Any) -> None:
        """Answer a request the agent sent (a permission request, say)."""
        await self.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}))

    def updates(self, kind: str) -> list[Message]:
        return [
            m["params"]["update"]
            for m in self.messages
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == kind
        ]


@asynccontextmanager
async def raw_editor(env: dict[str, str]) -> AsyncIterator[RawEditor]:
    """`agenthost acp` with `env`; its stderr is kept in `editor.stderr`."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "clients.cli",
        "acp",
        cwd=REPO,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    editor = RawEditor(process)
    try:
        yield editor
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            async with asyncio.timeout(WITHIN_S):
                assert await process.wait() == 0, editor.stderr
                await editor._errors
            assert editor.not_protocol == [], editor.not_protocol
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            editor._reader.cancel()
            editor._errors.cancel()
