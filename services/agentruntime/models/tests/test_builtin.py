from __future__ import annotations

import asyncio
import json
import re
from contextlib import aclosing
from pathlib import Path

import pytest

from services.agentruntime.models.base import (
    AssistantMessage,
    ChatMessage,
    Finish,
    ModelChunk,
    ModelError,
    ModelRequest,
    StreamedAnswer,
    TextDelta,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from services.agentruntime.models.builtin import (
    BuiltinAdapter,
    ScriptedReply,
    ScriptedToolCall,
    load_script,
)
from services.agentruntime.models.tests.support import TIMEOUT_S, collect, wait

PLAN = "# Plan\n1. Read the code\n2. Change it"


def request(text: str = "hello there") -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text)])


def answer(chunks: list[ModelChunk]) -> StreamedAnswer:
    folded = StreamedAnswer()
    for chunk in chunks:
        folded.add(chunk)
    return folded


async def test_default_echoes_the_last_user_message_in_several_deltas() -> None:
    adapter = BuiltinAdapter()
    conversation = ModelRequest(
        messages=[UserMessage("first"), AssistantMessage("ok"), UserMessage("hello there")]
    )

    chunks = await collect(adapter, conversation)

    deltas = [chunk for chunk in chunks if isinstance(chunk, TextDelta)]
    assert len(deltas) > 1
    assert "".join(delta.text for delta in deltas) == "Echo: hello there"
    assert chunks[-1] == Finish("stop")
    assert not any(isinstance(chunk, ToolCallRequest) for chunk in chunks)
    assert adapter.requests == [conversation]


async def test_default_is_deterministic() -> None:
    first = await collect(BuiltinAdapter(), request("same"))
    second = await collect(BuiltinAdapter(), request("same"))
    assert first == second


async def test_scripted_replies_are_used_in_order_then_echo() -> None:
    adapter = BuiltinAdapter([ScriptedReply(text="one"), ScriptedReply(text="two")])

    texts = [answer(await collect(adapter, request("x"))).text for _ in range(3)]

    assert texts == ["one", "two", "Echo: x"]
    assert adapter.pending == 0
    assert len(adapter.requests) == 3


async def test_scripted_tool_calls_follow_the_text() -> None:
    adapter = BuiltinAdapter(
        [
            ScriptedReply(
                text="Here is my plan.",
                tool_calls=[
                    ScriptedToolCall("exit_plan_mode", {"plan": PLAN}),
                    ScriptedToolCall("read_file", {"path": "a.txt"}, call_id="mine"),
                ],
            )
        ]
    )

    chunks = await collect(adapter, request())

    result = answer(chunks)
    assert result.text == "Here is my plan."
    assert [
        (call.call_id, call.name, json.loads(call.args_json)) for call in result.tool_calls
    ] == [
        ("builtin-call-1", "exit_plan_mode", {"plan": PLAN}),
        ("mine", "read_file", {"path": "a.txt"}),
    ]
    assert chunks[-1] == Finish("tool_calls")
    # Text first, then the calls, then Finish.
    assert isinstance(chunks[0], TextDelta)
    assert [type(chunk) for chunk in chunks[-3:]] == [ToolCallRequest, ToolCallRequest, Finish]


async def test_generated_call_ids_are_unique_across_replies() -> None:
    adapter = BuiltinAdapter(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("a")]),
            ScriptedReply(tool_calls=[ScriptedToolCall("b")]),
        ]
    )

    first = answer(await collect(adapter, request())).tool_calls
    second = answer(await collect(adapter, request())).tool_calls

    assert [first[0].call_id, second[0].call_id] == ["builtin-call-1", "builtin-call-2"]
    assert first[0].args_json == "{}"


async def test_held_reply_waits_for_release_while_tests_act() -> None:
    adapter = BuiltinAdapter()
    reply = adapter.enqueue(ScriptedReply(text="Thinking about it", hold=True))
    seen: list[ModelChunk] = []
    text_done = asyncio.Event()

    async def consume() -> None:
        async with aclosing(adapter.stream(request("plan it"))) as chunks:
            async for chunk in chunks:
                seen.append(chunk)
                if "".join(c.text for c in seen if isinstance(c, TextDelta)) == reply.text:
                    text_done.set()

    task = asyncio.create_task(consume())
    await wait(reply.started)
    await wait(text_done)

    # The model is "generating": its text is out but it has not finished.
    assert reply.request is adapter.requests[0]
    assert not task.done()
    assert not any(isinstance(chunk, Finish) for chunk in seen)

    reply.release()
    await asyncio.wait_for(task, TIMEOUT_S)
    assert seen[-1] == Finish("stop")
    assert reply.ended.is_set()
    assert reply.outcome == "completed"


async def test_cancel_while_held_ends_the_reply_as_cancelled() -> None:
    adapter = BuiltinAdapter()
    reply = adapter.enqueue(ScriptedReply(hold=True))

    async def consume() -> None:
        async with aclosing(adapter.stream(request())) as chunks:
            async for _ in chunks:
                pass

    task = asyncio.create_task(consume())
    await wait(reply.started)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert reply.ended.is_set()
    assert reply.outcome == "cancelled"


async def test_scripted_error_is_raised_after_its_text() -> None:
    error = ModelError("provider overloaded", retryable=True, status=503)
    adapter = BuiltinAdapter([ScriptedReply(text="partial", error=error)])
    seen: list[ModelChunk] = []

    with pytest.raises(ModelError) as raised:
        async with aclosing(adapter.stream(request())) as chunks:
            async for chunk in chunks:
                seen.append(chunk)

    assert raised.value is error
    assert (raised.value.retryable, raised.value.status) == (True, 503)
    assert answer(seen).text == "partial"
    assert not any(isinstance(chunk, Finish) for chunk in seen)
    assert adapter.pending == 0


async def test_records_the_full_request() -> None:
    adapter = BuiltinAdapter()
    messages: list[ChatMessage] = [
        UserMessage("read a.txt"),
        AssistantMessage("", (ToolCallRequest("c1", "read_file", "{}"),)),
        ToolResultMessage("c1", "contents", ok=True),
    ]
    conversation = ModelRequest(model="builtin-echo", messages=messages)

    await collect(adapter, conversation)
    messages.append(UserMessage("later"))  # the caller's list is not shared

    recorded = adapter.requests[0]
    assert recorded == conversation
    assert len(recorded.messages) == 3
    assert answer(await collect(adapter, recorded)).text == "Echo: read a.txt"


def write_script(tmp_path: Path, script: object) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


async def test_json_script_file(tmp_path: Path) -> None:
    path = write_script(
        tmp_path,
        {
            "replies": [
                {
                    "text": "Let me plan.",
                    "tool_calls": [{"name": "exit_plan_mode", "args": {"plan": PLAN}}],
                },
                {"text": "Done."},
                {"error": {"message": "rate limited", "retryable": True, "status": 429}},
            ]
        },
    )
    adapter = BuiltinAdapter.from_script_file(path)

    first = answer(await collect(adapter, request()))
    second = answer(await collect(adapter, request()))
    with pytest.raises(ModelError) as raised:
        await collect(adapter, request())

    assert first.text == "Let me plan."
    assert [(c.name, json.loads(c.args_json)) for c in first.tool_calls] == [
        ("exit_plan_mode", {"plan": PLAN})
    ]
    assert second.text == "Done."
    assert (raised.value.message, raised.value.retryable, raised.value.status) == (
        "rate limited",
        True,
        429,
    )


def test_script_file_may_be_a_bare_list(tmp_path: Path) -> None:
    replies = load_script(write_script(tmp_path, [{"text": "a"}, {}]))
    assert [reply.text for reply in replies] == ["a", ""]


@pytest.mark.parametrize(
    ("script", "complaint"),
    [
        ({"replies": [{"txt": "typo"}]}, "unknown keys ['txt']"),
        ({"replys": []}, "unknown keys ['replys']"),
        ([{"tool_calls": [{"args": {}}]}], "non-empty name"),
        ([{"error": {"retryable": True}}], "message"),
        ("just text", "list of replies"),
    ],
)
def test_bad_script_files_fail_loudly(tmp_path: Path, script: object, complaint: str) -> None:
    with pytest.raises(ValueError, match=re.escape(complaint)):
        load_script(write_script(tmp_path, script))
