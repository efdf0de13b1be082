"""The OpenAI-compatible adapter against a local server speaking the protocol."""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from pathlib import Path

import pytest
from agenthost.sessionlog.v1 import events_pb2

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
    Usage,
    UserMessage,
)
from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
from services.agentruntime.models.tests.conftest import MakeAdapter
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    chunk,
    finish_chunk,
    text_chunk,
    tool_fragment,
    usage_chunk,
)
from services.agentruntime.models.tests.support import (
    API_KEY,
    MAX_ATTEMPTS,
    MODEL,
    TIMEOUT_S,
    collect,
    wait,
)

READ_FILE_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
}


def text_reply(*pieces: str) -> ProviderReply:
    return ProviderReply(
        stream=[
            chunk({"role": "assistant", "content": ""}),
            *(text_chunk(piece) for piece in pieces),
            finish_chunk("stop"),
            usage_chunk(),
            DONE,
        ]
    )


def simple_request(text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text)])


def answer(chunks: list[ModelChunk]) -> StreamedAnswer:
    folded = StreamedAnswer()
    for item in chunks:
        folded.add(item)
    return folded


async def test_text_streams_as_deltas_as_they_arrive(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    more = asyncio.Event()
    provider.enqueue(
        ProviderReply(
            stream=[
                text_chunk("Hel"),
                more,
                text_chunk("lo, "),
                text_chunk("world"),
                finish_chunk("stop"),
                DONE,
            ]
        )
    )
    first_seen = asyncio.Event()
    seen: list[ModelChunk] = []

    async def consume() -> None:
        async with aclosing(adapter.stream(simple_request())) as chunks:
            async for item in chunks:
                if not isinstance(item, Usage):  # test_usage.py checks it
                    seen.append(item)
                first_seen.set()

    task = asyncio.create_task(consume())
    # The first delta reaches us while the server still holds back the rest.
    await wait(first_seen)
    assert seen == [TextDelta("Hel")]
    more.set()
    await asyncio.wait_for(task, TIMEOUT_S)

    assert seen == [TextDelta("Hel"), TextDelta("lo, "), TextDelta("world"), Finish("stop")]


async def test_reasoning_streams_as_it_arrives_before_the_text(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    more = asyncio.Event()
    # As deepseek-reasoner streams: the field not streaming is null.
    provider.enqueue(
        ProviderReply(
            stream=[
                chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
                chunk({"content": None, "reasoning_content": "The user "}),
                more,
                chunk({"content": None, "reasoning_content": "says hi."}),
                chunk({"content": "Hello", "reasoning_content": None}),
                chunk({"content": "!", "reasoning_content": None}),
                finish_chunk("stop"),
                DONE,
            ]
        ),
        text_reply("ok"),
    )
    first_seen = asyncio.Event()
    seen: list[ModelChunk] = []

    async def consume() -> None:
        async with aclosing(adapter.stream(simple_request())) as chunks:
            async for item in chunks:
                if not isinstance(item, Usage):  # test_usage.py checks it
                    seen.append(item)
                first_seen.set()

    task = asyncio.create_task(consume())
    await wait(first_seen)
    assert seen == [ReasoningDelta("The user ")]
    more.set()
    await asyncio.wait_for(task, TIMEOUT_S)

    assert seen == [
        ReasoningDelta("The user "),
        ReasoningDelta("says hi."),
        TextDelta("Hello"),
        TextDelta("!"),
        Finish("stop"),
    ]
    folded = answer(seen)
    assert (folded.reasoning, folded.text) == ("The user says hi.", "Hello!")

    # The next request carries the answer's text only, never its reasoning.
    history: list[ChatMessage] = [
        UserMessage("hi"),
        AssistantMessage(folded.text),
        UserMessage("again"),
    ]
    await collect(adapter, ModelRequest(messages=history))
    assert provider.requests[1].body["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "again"},
    ]


async def test_request_body_sections_tools_model_and_bearer(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    provider.enqueue(text_reply("ok"))
    request = ModelRequest(
        sections=[
            events_pb2.PromptSection(id="plan", order=50, text="PLAN MODE"),
            events_pb2.PromptSection(id="base", order=0, text="You are helpful."),
            events_pb2.PromptSection(id="empty", order=10, text=""),
            events_pb2.PromptSection(id="tools", order=20, text="Use tools."),
        ],
        tools=[
            events_pb2.ToolSchema(
                name="read_file",
                description="Read a file",
                parameters_json=json.dumps(READ_FILE_SCHEMA),
            ),
            events_pb2.ToolSchema(name="exit_plan_mode", description="Leave plan mode"),
        ],
        messages=[UserMessage("hello")],
    )

    await collect(adapter, request)

    [sent] = provider.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.body["model"] == MODEL
    assert sent.body["stream"] is True
    assert sent.body["messages"] == [
        {"role": "system", "content": "You are helpful.\n\nUse tools.\n\nPLAN MODE"},
        {"role": "user", "content": "hello"},
    ]
    assert sent.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": READ_FILE_SCHEMA,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "exit_plan_mode",
                "description": "Leave plan mode",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]


async def test_requests_go_through_the_proxy_the_environment_names(
    provider: FakeProvider, make_adapter: MakeAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The provider plays the proxy: the model's own host does not resolve.
    monkeypatch.setenv("HTTP_PROXY", provider.url.removesuffix("/v1"))
    provider.enqueue(text_reply("proxied"))
    adapter = make_adapter(base_url="http://model.example.invalid/v1")

    assert answer(await collect(adapter, simple_request())).text == "proxied"
    [sent] = provider.requests
    assert (sent.path, sent.headers["host"]) == ("/v1/chat/completions", "model.example.invalid")


async def test_hosts_no_proxy_names_are_reached_directly(
    provider: FakeProvider, adapter: OpenAICompatAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    provider.enqueue(text_reply("direct"))

    assert answer(await collect(adapter, simple_request())).text == "direct"


async def test_a_netrc_login_for_the_host_leaves_the_bearer_token_alone(
    provider: FakeProvider,
    adapter: OpenAICompatAdapter,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    (tmp_path / ".netrc").write_text("default login someone password secret\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    provider.enqueue(text_reply("ok"))

    assert answer(await collect(adapter, simple_request())).text == "ok"
    assert provider.requests[0].headers["authorization"] == f"Bearer {API_KEY}"


async def test_request_model_overrides_and_no_tools_or_system_when_empty(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    provider.enqueue(text_reply("ok"))

    await collect(adapter, ModelRequest(model="deepseek-reasoner", messages=[UserMessage("hello")]))

    body = provider.requests[0].body
    assert body["model"] == "deepseek-reasoner"
    assert "tools" not in body
    assert body["messages"] == [{"role": "user", "content": "hello"}]


async def test_tool_call_round_trip(provider: FakeProvider, adapter: OpenAICompatAdapter) -> None:
    provider.enqueue(
        ProviderReply(
            stream=[
                chunk({"role": "assistant", "content": None}),
                tool_fragment(0, call_id="call_a", name="read_file"),
                tool_fragment(0, arguments='{"pa'),
                tool_fragment(1, call_id="call_b", name="exit_plan_mode", arguments='{"plan"'),
                tool_fragment(0, arguments='th": "a.txt"}'),
                tool_fragment(1, arguments=': "# Plan"}'),
                finish_chunk("tool_calls"),
                DONE,
            ]
        ),
        text_reply("The file ", "says hi."),
    )
    tools = [events_pb2.ToolSchema(name="read_file", parameters_json=json.dumps(READ_FILE_SCHEMA))]
    first_request = ModelRequest(tools=tools, messages=[UserMessage("read a.txt")])

    first = await collect(adapter, first_request)

    calls = [
        ToolCallRequest("call_a", "read_file", '{"path": "a.txt"}'),
        ToolCallRequest("call_b", "exit_plan_mode", '{"plan": "# Plan"}'),
    ]
    assert first == [*calls, Finish("tool_calls")]

    second_request = ModelRequest(
        tools=tools,
        messages=[
            UserMessage("read a.txt"),
            AssistantMessage("", tuple(calls)),
            ToolResultMessage("call_a", "hi"),
            ToolResultMessage("call_b", "not in plan mode", ok=False),
        ],
    )
    second = answer(await collect(adapter, second_request))

    assert second.text == "The file says hi."
    assert second.tool_calls == []
    assert second.finish == Finish("stop")
    assert provider.requests[1].body["messages"] == [
        {"role": "user", "content": "read a.txt"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "exit_plan_mode", "arguments": '{"plan": "# Plan"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_b", "content": "not in plan mode"},
    ]


async def test_assistant_text_is_sent_back_as_content(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    provider.enqueue(text_reply("ok"))

    await collect(
        adapter, ModelRequest(messages=[UserMessage("a"), AssistantMessage("b"), UserMessage("c")])
    )

    assert provider.requests[0].body["messages"][1] == {"role": "assistant", "content": "b"}


async def test_stream_ending_without_done_after_a_finish_completes(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    provider.enqueue(ProviderReply(stream=[text_chunk("ok"), finish_chunk("length")]))

    assert await collect(adapter, simple_request()) == [TextDelta("ok"), Finish("length")]


async def test_http_400_is_a_non_retryable_error_with_the_server_message(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    provider.enqueue(ProviderReply(status=400, error_message="Invalid 'messages': empty"))

    with pytest.raises(ModelError) as raised:
        await collect(adapter, simple_request())

    assert raised.value.retryable is False
    assert raised.value.status == 400
    assert "Invalid 'messages': empty" in raised.value.message
    assert len(provider.requests) == 1


async def test_503_then_200_succeeds_after_a_retry(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    provider.enqueue(ProviderReply(status=503, error_message="overloaded"), text_reply("fine"))

    result = answer(await collect(adapter, simple_request()))

    assert result.text == "fine"
    assert len(provider.requests) == 2
    assert provider.requests[0].body == provider.requests[1].body


async def test_persistent_429_fails_after_max_attempts(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    provider.enqueue(
        *[
            ProviderReply(status=429, error_message="Rate limit reached")
            for _ in range(MAX_ATTEMPTS + 1)
        ]
    )

    with pytest.raises(ModelError) as raised:
        await collect(adapter, simple_request())

    assert (raised.value.retryable, raised.value.status) == (True, 429)
    assert "Rate limit reached" in raised.value.message
    assert len(provider.requests) == MAX_ATTEMPTS


async def test_dropped_connection_before_any_chunk_is_retried(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    provider.enqueue(ProviderReply(drop=True), text_reply("back"))

    result = answer(await collect(adapter, simple_request()))

    assert result.text == "back"
    assert len(provider.requests) == 2


async def test_failure_after_a_yielded_chunk_is_not_retried(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    provider.enqueue(ProviderReply(stream=[text_chunk("half")], drop=True), text_reply("again"))
    seen: list[ModelChunk] = []

    with pytest.raises(ModelError) as raised:
        async with aclosing(adapter.stream(simple_request())) as chunks:
            async for item in chunks:
                seen.append(item)

    assert seen == [TextDelta("half")]
    assert raised.value.retryable is True
    assert raised.value.status is None
    assert len(provider.requests) == 1


async def test_connection_refused_fails_after_max_attempts() -> None:
    # A provider that was started and stopped leaves a port nobody listens on.
    gone = FakeProvider()
    await gone.start()
    await gone.stop()
    adapter = OpenAICompatAdapter(
        OpenAICompatConfig(base_url=gone.url, model=MODEL, max_attempts=2, backoff_initial_s=0.0)
    )

    with pytest.raises(ModelError) as raised:
        await collect(adapter, simple_request())
    await adapter.aclose()

    assert (raised.value.retryable, raised.value.status) == (True, None)


async def test_a_200_that_is_not_an_event_stream_is_a_final_error(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    provider.enqueue(ProviderReply(stream=["<html>"], content_type="text/html"))

    with pytest.raises(ModelError) as raised:
        await collect(adapter, simple_request())

    assert raised.value.message == (
        "not an event stream: the model server answered with 'text/html' "
        "(is the base URL an OpenAI-compatible API?)"
    )
    assert raised.value.retryable is False
    assert len(provider.requests) == 1


async def test_in_band_stream_error_is_raised(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    provider.enqueue(ProviderReply(stream=[{"error": {"message": "content filtered"}}]))

    with pytest.raises(ModelError, match="content filtered") as raised:
        await collect(adapter, simple_request())

    assert raised.value.retryable is False


async def test_cancellation_mid_stream_closes_the_connection(
    provider: FakeProvider, adapter: OpenAICompatAdapter
) -> None:
    never = asyncio.Event()
    provider.enqueue(ProviderReply(stream=[text_chunk("partial"), never]), text_reply("next"))
    got_first = asyncio.Event()

    async def consume() -> None:
        async with aclosing(adapter.stream(simple_request())) as chunks:
            async for _ in chunks:
                got_first.set()

    task = asyncio.create_task(consume())
    await wait(got_first)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    await wait(provider.disconnected)
    # The adapter stays usable for the next request.
    assert answer(await collect(adapter, simple_request())).text == "next"


def test_backoff_is_exponential_bounded_and_honours_retry_after() -> None:
    config = OpenAICompatConfig(
        base_url="http://127.0.0.1:1", model=MODEL, backoff_initial_s=0.5, backoff_max_s=4.0
    )
    assert [config.backoff_s(attempt, None) for attempt in (1, 2, 3, 4, 5)] == [
        0.5,
        1.0,
        2.0,
        4.0,
        4.0,
    ]
    assert config.backoff_s(1, 3.0) == 3.0
    assert config.backoff_s(1, 60.0) == 4.0
