"""`agenthost acp` beside the Python SDK on one session, and its answers to bad
input: a plan mode set through the SDK reaches the editor as
current_mode_update, the prompt the editor sent is in the SDK's history;
malformed JSON, an unknown method and wrong params get their JSON-RPC error
codes while the process keeps serving; a gateway gone away is a clear error,
not a hang. The editor here writes protocol lines itself (tests/acp drives
the agent with the official client library)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from clients.sdk import AgentHostClient, user_texts
from tests.support.hosts import REPO
from tests.support.node import agenthost_up

WITHIN_S = 30
Message = dict[str, Any]


class RawEditor:
    """An `agenthost acp` process and the messages it sent, read as they come."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.messages: list[Message] = []
        self._arrived = asyncio.Event()
        self._next_id = 100
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            self.messages.append(json.loads(line))
            self._arrived.set()

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

    async def call(self, method: str, params: Any) -> Message:
        """The response (result or error) to one request."""
        self._next_id += 1
        request_id = self._next_id
        await self.write(
            json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        )
        return await self.wait_for(lambda m: m.get("id") == request_id and "method" not in m)

    def updates(self, kind: str) -> list[Message]:
        return [
            m["params"]["update"]
            for m in self.messages
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == kind
        ]


@asynccontextmanager
async def raw_editor(env: dict[str, str]) -> AsyncIterator[RawEditor]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "clients.cli",
        "acp",
        cwd=REPO,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    editor = RawEditor(process)
    try:
        yield editor
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            async with asyncio.timeout(WITHIN_S):
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            editor._reader.cancel()


@pytest.mark.timeout(4 * WITHIN_S)
async def test_the_sdk_and_an_editor_share_a_session(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    project = tmp_path / "project"
    project.mkdir()
    stack = agenthost_up(data_dir)
    up = await stack.__aenter__()
    running = True
    try:
        gateway = cast(dict[str, str], up["addresses"])["gateway"]
        env = {**os.environ, "AGENTHOST_GATEWAY": gateway, "AGENTHOST_DATA_DIR": str(data_dir)}
        token = (data_dir / "token").read_text().strip()
        async with raw_editor(env) as editor:
            async with AgentHostClient(gateway, token) as sdk:
                await _share_a_session(editor, sdk, project)
                await _refuse_bad_input(editor, project)
            running = False
            await stack.__aexit__(None, None, None)
            await _gateway_gone(editor)
    finally:
        if running:
            await stack.__aexit__(None, None, None)


async def _share_a_session(editor: RawEditor, sdk: AgentHostClient, project: Path) -> None:
    init = await editor.call("initialize", {"protocolVersion": 1})
    assert init["result"]["protocolVersion"] == 1
    created = await editor.call("session/new", {"cwd": str(project), "mcpServers": []})
    session_id = created["result"]["sessionId"]
    session = await sdk.open_session(session_id)

    await session.set_plan(True)
    committed = await editor.wait_for(lambda m: _mode_update(m) == "plan")
    assert committed["params"]["sessionId"] == session_id

    reply = await editor.call(
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": "hello from the editor"}]},
    )
    assert reply["result"]["stopReason"] == "end_turn"
    await session.wait_until(
        lambda s: "hello from the editor" in user_texts(s.events), within=WITHIN_S
    )
    said = "".join(u["content"]["text"] for u in editor.updates("agent_message_chunk"))
    assert "hello from the editor" in said  # the built-in model echoes

    await session.set_plan(False)
    await editor.wait_for(lambda m: _mode_update(m) == "default")
    await session.close()


def _mode_update(message: Message) -> str | None:
    if message.get("method") != "session/update":
        return None
    update = message["params"]["update"]
    return cast(str, update["currentModeId"]) if "currentModeId" in update else None


async def _refuse_bad_input(editor: RawEditor, project: Path) -> None:
    """Each refused with its JSON-RPC code, and the process serves on."""
    await editor.write("{not json")
    parse = await editor.wait_for(lambda m: m.get("error", {}).get("code") == -32700)
    assert parse["id"] is None
    await editor.write("[1, 2]")
    await editor.wait_for(lambda m: m.get("error", {}).get("code") == -32600)
    unknown = await editor.call("session/nonsense", {})
    assert unknown["error"]["code"] == -32601
    wrong = await editor.call("session/prompt", {"sessionId": 5})
    assert wrong["error"]["code"] == -32602
    stranger = await editor.call("session/set_mode", {"sessionId": "nope", "modeId": "plan"})
    assert stranger["error"]["code"] == -32602
    listed = await editor.call("session/list", {"cwd": str(project)})
    assert len(listed["result"]["sessions"]) == 1


async def _gateway_gone(editor: RawEditor) -> None:
    """The stack stopped: a call fails at once with a clear error."""
    gone = await editor.call("session/list", {})
    assert gone["error"]["code"] == -32001
    assert "unreachable" in gone["error"]["message"]
