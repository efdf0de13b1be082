from __future__ import annotations

import asyncio
import itertools
import json
import re
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from services.agentruntime.models.base import (
    AssistantMessage,
    ChatMessage,
    Finish,
    ModelChunk,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    StreamedAnswer,
    TextDelta,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from services.agentruntime.models.builtin import (
    DELTA_PARTS,
    BuiltinAdapter,
    ScriptedReply,
    ScriptedToolCall,
    load_script,
)
from services.agentruntime.models.tests.support import TIMEOUT_S, collect, collect_timed, wait

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
    assert list(adapter.requests) == [conversation]


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


# --- reasoning, parts and timing -------------------------------------------


async def test_reasoning_streams_first_then_the_text() -> None:
    adapter = BuiltinAdapter([ScriptedReply(reasoning="Think it through.", text="Answer.")])

    chunks = await collect(adapter, request())

    kinds = [type(chunk) for chunk in chunks]
    assert kinds == [ReasoningDelta] * DELTA_PARTS + [TextDelta] * DELTA_PARTS + [Finish]
    folded = answer(chunks)
    assert (folded.reasoning, folded.text) == ("Think it through.", "Answer.")


async def test_parts_sets_how_many_deltas_text_and_reasoning_are_cut_into() -> None:
    adapter = BuiltinAdapter([ScriptedReply(reasoning="0123", text="abcdefghij", parts=5)])

    chunks = await collect(adapter, request())

    assert chunks == [
        *(ReasoningDelta(digit) for digit in "0123"),
        *(TextDelta(pair) for pair in ("ab", "cd", "ef", "gh", "ij")),
        Finish("stop"),
    ]


async def test_delta_s_spreads_the_deltas_out() -> None:
    delta_s = 0.05
    adapter = BuiltinAdapter(
        [ScriptedReply(reasoning="hmm", text="Hello!", parts=3, delta_s=delta_s)]
    )

    timed = await collect_timed(adapter, request())

    times = [at for at, chunk in timed if isinstance(chunk, TextDelta | ReasoningDelta)]
    assert len(times) == 6
    # Generous lower bounds only: a busy machine may be slower, never faster.
    assert all(later - earlier >= 0.8 * delta_s for earlier, later in itertools.pairwise(times))
    assert answer([chunk for _, chunk in timed]).text == "Hello!"


async def test_hold_s_waits_after_the_text_before_the_tool_calls_and_finish() -> None:
    hold_s = 0.2
    adapter = BuiltinAdapter(
        [
            ScriptedReply(
                text="Writing it.",
                hold_s=hold_s,
                tool_calls=[ScriptedToolCall("write_file", {"path": "a.txt"})],
            )
        ]
    )

    timed = await collect_timed(adapter, request())

    last_text = max(at for at, chunk in timed if isinstance(chunk, TextDelta))
    call_at = next(at for at, chunk in timed if isinstance(chunk, ToolCallRequest))
    assert call_at - last_text >= 0.8 * hold_s
    assert [type(chunk) for _, chunk in timed][-2:] == [ToolCallRequest, Finish]


async def test_hold_s_still_applies_when_the_gate_opens_early() -> None:
    hold_s = 0.2
    adapter = BuiltinAdapter()
    reply = adapter.enqueue(ScriptedReply(text="x", hold_s=hold_s, hold=True))
    task = asyncio.create_task(collect_timed(adapter, request()))
    await wait(reply.started)
    reply.release()

    timed = await asyncio.wait_for(task, TIMEOUT_S)

    (text_at, _), (finish_at, finish) = timed
    assert finish == Finish("stop")
    assert finish_at - text_at >= 0.8 * hold_s
    assert reply.outcome == "completed"


@pytest.mark.parametrize(
    "reply",
    [
        ScriptedReply(text="a long answer", delta_s=60),
        ScriptedReply(text="thinking", hold_s=60),
        ScriptedReply(reasoning="pondering", delta_s=60),
    ],
    ids=["between-deltas", "holding", "between-reasoning-deltas"],
)
async def test_cancel_while_timing_ends_the_reply_promptly_as_cancelled(
    reply: ScriptedReply,
) -> None:
    adapter = BuiltinAdapter([reply])
    got_first = asyncio.Event()

    async def consume() -> None:
        async with aclosing(adapter.stream(request())) as chunks:
            async for _ in chunks:
                got_first.set()

    task = asyncio.create_task(consume())
    await wait(got_first)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, TIMEOUT_S)

    assert reply.ended.is_set()
    assert reply.outcome == "cancelled"


@pytest.mark.parametrize(
    ("settings", "complaint"),
    [
        ({"hold_s": -1}, "hold_s is a non-negative number of seconds"),
        ({"delta_s": float("nan")}, "delta_s is a non-negative number of seconds"),
        ({"parts": 0}, "parts is a whole number, at least 1"),
    ],
)
def test_scripted_reply_refuses_bad_timing(settings: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ValueError, match=re.escape(complaint)):
        ScriptedReply(**settings)


async def test_json_script_with_reasoning_timing_and_any_tool(tmp_path: Path) -> None:
    path = write_script(
        tmp_path,
        [
            {
                "reasoning": "The user wants a plan.",
                "text": "Here is my plan.",
                "parts": 4,
                "delta_s": 0.01,
                "hold_s": 0.02,
                "tool_calls": [{"name": "exit_plan_mode", "args": {"plan": PLAN}}],
            },
            {"tool_calls": [{"name": "run_command", "args": {"argv": ["make", "test"]}}]},
            {"hold_s": 1},
        ],
    )

    first, second, third = load_script(path)

    assert (first.reasoning, first.text, first.parts) == (
        "The user wants a plan.",
        "Here is my plan.",
        4,
    )
    assert (first.delta_s, first.hold_s) == (0.01, 0.02)
    assert (second.tool_calls[0].name, second.tool_calls[0].args) == (
        "run_command",
        {"argv": ["make", "test"]},
    )
    assert (third.hold_s, third.delta_s, third.parts, third.reasoning) == (1, 0, DELTA_PARTS, "")

    adapter = BuiltinAdapter([first, second])
    played = answer(await collect(adapter, request()))
    assert (played.reasoning, played.text) == ("The user wants a plan.", "Here is my plan.")
    assert [call.name for call in played.tool_calls] == ["exit_plan_mode"]
    assert answer(await collect(adapter, request())).tool_calls[0].name == "run_command"


@pytest.mark.parametrize(
    ("reply", "complaint"),
    [
        ({"reasoning": 5}, "reasoning is a string, not 5"),
        ({"text": ["a"]}, "text is a string, not ['a']"),
        ({"hold_s": -1}, "hold_s is a non-negative number of seconds, not -1"),
        ({"hold_s": "2"}, "hold_s is a non-negative number of seconds, not '2'"),
        ({"delta_s": True}, "delta_s is a non-negative number of seconds, not True"),
        ({"parts": 0}, "parts is a whole number, at least 1, not 0"),
        ({"parts": 1.5}, "parts is a whole number, at least 1, not 1.5"),
        ({"tool_calls": {"name": "x"}}, "tool_calls is a list"),
        ({"hold": True}, "unknown keys ['hold']"),
    ],
)
def test_bad_reply_fields_name_the_file_and_the_reply(
    tmp_path: Path, reply: dict[str, object], complaint: str
) -> None:
    path = write_script(tmp_path, [{"text": "fine"}, reply])

    with pytest.raises(ValueError) as raised:
        load_script(path)

    assert str(raised.value) == f"{path}: reply 1: {complaint}"
