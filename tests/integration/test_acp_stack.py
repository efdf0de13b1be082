"""Where `agenthost acp` finds its stack, and what an editor sees when the
gateway goes away and comes back: it starts a stack in the background when
none answers (saying so on stderr, stdout carrying only the protocol), which
keeps serving the next editor after the first closed; a call made while the
gateway is away fails at once with a clear error; a turn in flight ends for
the editor once the gateway is back."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from pathlib import Path

import pytest

from services.common.server import port_in_use
from tests.support.acp import WITHIN_S, Message, RawEditor, raw_editor
from tests.support.hosts import free_base_port
from tests.support.process_stack import process_stack

GATEWAY_AWAY = -32001
RETRY_S = 0.2


async def _open(editor: RawEditor, project: Path) -> str:
    init = await editor.call("initialize", {"protocolVersion": 1})
    assert init["result"]["protocolVersion"] == 1
    created = await editor.call("session/new", {"cwd": str(project), "mcpServers": []})
    return str(created["result"]["sessionId"])


def _prompt(session_id: str, text: str) -> dict[str, object]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


SLOW_ANSWER = "A slow answer, streamed across a gateway restart."


@pytest.mark.timeout(4 * WITHIN_S)
async def test_an_editor_outlives_a_gateway_restart(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    script = tmp_path / "script.json"
    slow = {"text": SLOW_ANSWER, "parts": 8, "delta_s": 0.25}
    script.write_text(json.dumps({"replies": [slow]}))
    async with process_stack(tmp_path / "data", {"AGENTHOST_BUILTIN_SCRIPT": str(script)}) as stack:
        env = {**os.environ, "AGENTHOST_GATEWAY": stack.gateway, "AGENTHOST_TOKEN": stack.token}
        async with raw_editor(env) as editor:
            session_id = await _open(editor, project)
            turn = await editor.send("session/prompt", _prompt(session_id, "slowly"))
            await editor.wait_for(lambda _: bool(_said(editor)))
            stack.kill("gateway")
            away = await editor.call("session/prompt", _prompt(session_id, "while away"))
            assert away["error"]["code"] == GATEWAY_AWAY
            assert "unreachable" in away["error"]["message"]
            listed = await editor.call("session/list", {})
            assert listed["error"]["code"] == GATEWAY_AWAY

            await stack.restart("gateway")
            # The turn in flight ends for the editor once the client is back,
            # with the whole answer, each piece once.
            ended = await editor.response(turn)
            assert ended["result"]["stopReason"] == "end_turn"
            assert _said(editor) == SLOW_ANSWER

            reply = await _until_served(editor, session_id)
            assert reply["result"]["stopReason"] == "end_turn"
            assert _said(editor) == f"{SLOW_ANSWER}Echo: once back"


def _said(editor: RawEditor) -> str:
    return "".join(u["content"]["text"] for u in editor.updates("agent_message_chunk"))


async def _until_served(editor: RawEditor, session_id: str) -> Message:
    """The prompt, sent again while the client's channel is still reconnecting."""
    async with asyncio.timeout(WITHIN_S):
        while True:
            reply = await editor.call("session/prompt", _prompt(session_id, "once back"))
            if "error" not in reply:
                return reply
            assert reply["error"]["code"] == GATEWAY_AWAY, reply
            await asyncio.sleep(RETRY_S)  # a retry interval, not a synchronisation


@pytest.mark.timeout(4 * WITHIN_S)
async def test_without_a_stack_it_starts_one_that_outlives_the_editor(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    gateway = f"127.0.0.1:{free_base_port()}"
    env = {**os.environ, "AGENTHOST_GATEWAY": gateway, "AGENTHOST_DATA_DIR": str(tmp_path / "data")}
    env.pop("AGENTHOST_TOKEN", None)
    async with raw_editor(env) as first:
        session_id = await _open(first, project)
        reply = await first.call("session/prompt", _prompt(session_id, "hello"))
        assert reply["result"]["stopReason"] == "end_turn"
    assert f"no agenthost stack answers at {gateway}: starting one" in first.stderr
    started = re.search(r"in the background now \(pid (\d+)", first.stderr)
    assert started, first.stderr
    pid = int(started.group(1))
    try:
        # The next editor finds it (and the session) instead of starting another.
        async with raw_editor(env) as second:
            await second.call("initialize", {"protocolVersion": 1})
            listed = await second.call("session/list", {"cwd": str(project)})
            assert [s["sessionId"] for s in listed["result"]["sessions"]] == [session_id]
        assert "starting one" not in second.stderr
    finally:
        await _stop(pid)
    assert not port_in_use(gateway)


async def _stop(pid: int) -> None:
    """Ctrl-C for a stack this test did not start itself, and its end."""
    ended = asyncio.Event()
    handle = os.pidfd_open(pid)
    loop = asyncio.get_running_loop()
    loop.add_reader(handle, ended.set)  # readable once the process has ended
    try:
        os.kill(pid, signal.SIGINT)
        async with asyncio.timeout(WITHIN_S):
            await ended.wait()
    finally:
        loop.remove_reader(handle)
        os.close(handle)
