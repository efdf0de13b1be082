"""`agenthost acp` beside the Python SDK on one session, and its answers to bad
input: a plan mode set through the SDK reaches the editor as
current_mode_update, the prompt the editor sent is in the SDK's history and
its model request's usage reaches the editor as usage_update, a
plan review's "keep planning" carries the editor's feedback, "allow always"
is a rule for the editor's folder;
malformed JSON, an unknown method and wrong params get their JSON-RPC error
codes while the process keeps serving; a gateway gone away is a clear error,
not a hang. The editor here writes protocol lines itself (tests/acp drives
the agent with the official client library)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import cast

import pytest

from clients.sdk import AgentHostClient, user_texts
from tests.support.acp import WITHIN_S, Message, RawEditor, raw_editor
from tests.support.node import agenthost_up


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
    # The turn's model request, as the runtime recorded it: the context in
    # use against the built-in model's window (no prices, so no cost).
    used = await editor.wait_for(lambda m: _update_kind(m) == "usage_update")
    usage = used["params"]["update"]
    assert used["params"]["sessionId"] == session_id
    assert usage["size"] == 32_000 and 0 < usage["used"] < usage["size"]
    assert "cost" not in usage or usage["cost"] is None

    await session.set_plan(False)
    await editor.wait_for(lambda m: _mode_update(m) == "default")

    # The session's commands, typed in the editor: /plan enters plan mode.
    shown = len(_modes(editor))
    command = await editor.call(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "/plan"}]}
    )
    assert command["result"]["stopReason"] == "end_turn"
    await editor.wait_for(lambda _: len(_modes(editor)) > shown)
    assert _modes(editor)[shown:] == ["plan"]
    await session.close()


def _modes(editor: RawEditor) -> list[str]:
    """The modes the editor was told, in order."""
    return [mode for m in editor.messages if (mode := _mode_update(m)) is not None]


def _update_kind(message: Message) -> str | None:
    if message.get("method") != "session/update":
        return None
    return cast(str, message["params"]["update"]["sessionUpdate"])


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


PLAN_SCRIPT = {
    "replies": [
        {
            "text": "Here is my plan.",
            "tool_calls": [{"name": "exit_plan_mode", "args": {"plan": "# Plan\n\n1. Cache."}}],
        },
        {"text": "I will plan the tests too."},
    ]
}


@pytest.mark.timeout(4 * WITHIN_S)
async def test_keep_planning_carries_the_editors_feedback(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    project = tmp_path / "project"
    project.mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps(PLAN_SCRIPT))
    async with agenthost_up(data_dir, {"AGENTHOST_BUILTIN_SCRIPT": str(script)}) as up:
        gateway = cast(dict[str, str], up["addresses"])["gateway"]
        env = {**os.environ, "AGENTHOST_GATEWAY": gateway, "AGENTHOST_DATA_DIR": str(data_dir)}
        token = (data_dir / "token").read_text().strip()
        async with raw_editor(env) as editor, AgentHostClient(gateway, token) as sdk:
            await editor.call("initialize", {"protocolVersion": 1})
            created = await editor.call("session/new", {"cwd": str(project), "mcpServers": []})
            session_id = created["result"]["sessionId"]
            again = await editor.call("session/new", {"cwd": str(project), "mcpServers": []})
            assert again["result"]["sessionId"] == session_id  # the blank session, reused
            chosen = await editor.call(
                "session/set_config_option",
                {"sessionId": session_id, "configId": "mode", "value": "plan"},
            )
            assert chosen["result"]["configOptions"][0]["currentValue"] == "plan"
            await editor.wait_for(lambda m: _mode_update(m) == "plan")
            session = await sdk.open_session(session_id)
            assert session.plan.state is not None and session.plan.state.active

            await editor.write(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "session/prompt",
                        "params": {
                            "sessionId": session_id,
                            "prompt": [{"type": "text", "text": "plan a cache"}],
                        },
                    }
                )
            )
            review = await editor.wait_for(
                lambda m: m.get("method") == "session/request_permission"
            )
            options = [o["optionId"] for o in review["params"]["options"]]
            assert options == ["approve", "keep-planning"]
            busy = await editor.call(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "meanwhile"}]},
            )
            assert busy["error"]["code"] == -32003  # its turn runs: one at a time
            await editor.respond(
                review,
                {
                    "outcome": {
                        "outcome": "selected",
                        "optionId": "keep-planning",
                        "_meta": {"feedback": "plan the tests too"},
                    }
                },
            )
            ended = await editor.wait_for(lambda m: m.get("id") == 1 and "method" not in m)
            assert ended["result"]["stopReason"] == "end_turn"
            await session.wait_until(
                lambda s: any(e.HasField("question_answered") for e in s.events), within=WITHIN_S
            )
            answers = [
                e.question_answered.answer
                for e in session.events
                if e.HasField("question_answered")
            ]
            assert [a.feedback for a in answers] == ["plan the tests too"]
            assert session.plan.state is not None and session.plan.state.active  # still planning
            fresh = await editor.call("session/new", {"cwd": str(project), "mcpServers": []})
            assert fresh["result"]["sessionId"] != session_id  # this one is no blank any more


ALWAYS_SCRIPT = {
    "replies": [
        {"text": "A check.", "tool_calls": [{"name": "shell", "args": {"command": "echo one"}}]},
        {"text": "Checked."},
        {"text": "Again.", "tool_calls": [{"name": "shell", "args": {"command": "echo one more"}}]},
        {"text": "Checked again."},
    ]
}


@pytest.mark.timeout(4 * WITHIN_S)
async def test_allow_always_is_a_rule_for_the_editors_folder(tmp_path: Path) -> None:
    """ "Allow always" in the editor records a workspace rule: the folder's next
    session runs that command (with more arguments) without asking."""
    data_dir = tmp_path / "data"
    project = tmp_path / "project"
    project.mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps(ALWAYS_SCRIPT))
    async with agenthost_up(data_dir, {"AGENTHOST_BUILTIN_SCRIPT": str(script)}) as up:
        gateway = cast(dict[str, str], up["addresses"])["gateway"]
        env = {**os.environ, "AGENTHOST_GATEWAY": gateway, "AGENTHOST_DATA_DIR": str(data_dir)}
        token = (data_dir / "token").read_text().strip()
        async with raw_editor(env) as editor, AgentHostClient(gateway, token) as sdk:
            await editor.call("initialize", {"protocolVersion": 1})
            created = await editor.call("session/new", {"cwd": str(project), "mcpServers": []})
            first = created["result"]["sessionId"]
            prompt = await editor.send(
                "session/prompt",
                {"sessionId": first, "prompt": [{"type": "text", "text": "check"}]},
            )
            asked = await editor.wait_for(lambda m: m.get("method") == "session/request_permission")
            await editor.respond(
                asked, {"outcome": {"outcome": "selected", "optionId": "allow-always"}}
            )
            assert (await editor.response(prompt))["result"]["stopReason"] == "end_turn"
            session = await sdk.open_session(first)
            await session.wait_until(lambda s: len(s.permissions) == 1, within=WITHIN_S)
            [rule] = session.permissions
            assert (rule["grant"], rule["scope"]) == ("shell:echo one", "workspace")
            await session.close()

            # A new thread in the same folder: the rule covers the command with
            # more arguments, nobody is asked.
            again = await editor.call("session/new", {"cwd": str(project), "mcpServers": []})
            second = again["result"]["sessionId"]
            assert second != first
            reply = await editor.call(
                "session/prompt",
                {"sessionId": second, "prompt": [{"type": "text", "text": "check again"}]},
            )
            assert reply["result"]["stopReason"] == "end_turn"
            requests = [
                m for m in editor.messages if m.get("method") == "session/request_permission"
            ]
            assert requests == [asked]
            ran = [u.get("rawOutput", {}).get("output") for u in editor.updates("tool_call_update")]
            assert "exit code 0\none more\n" in ran
