"""`make bench-peers`' fake model speaks both wires its hosts read (chat
completions for agenthost and opencode, the Responses API for Codex), and
the comparison runs end to end on agenthost (the peers themselves stay out
of the tests: they are installed by `make bench-peers` only)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.peers import __main__ as peers
from bench.peers.fake_model import FakeModel, Script, sent_stamps

BASH = {  # opencode's shell tool, as chat completions offers it
    "type": "function",
    "function": {
        "name": "bash",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
            "required": ["command", "description"],
        },
    },
}
EXEC = {  # Codex's, as the Responses API offers it
    "type": "function",
    "name": "exec_command",
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}},
        "required": ["cmd"],
    },
}


@pytest.fixture
async def model() -> AsyncIterator[tuple[FakeModel, str]]:
    fake = FakeModel(Script(chunks=5))
    port = await fake.start()
    try:
        yield fake, f"http://127.0.0.1:{port}/v1"
    finally:
        await fake.stop()


async def sse(url: str, body: dict[str, Any]) -> list[tuple[str | None, str]]:
    """(event name, data) of each server-sent event of a streamed answer."""
    events: list[tuple[str | None, str]] = []
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        name = None
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, line[6:]))
                name = None
    return events


async def test_chat_completions_call_the_shell_tool_then_stream_text_with_usage(
    model: tuple[FakeModel, str],
) -> None:
    _, url = model
    user = {"role": "user", "content": "go"}
    called = await sse(
        f"{url}/chat/completions", {"messages": [user], "tools": [BASH], "stream": True}
    )
    assert called[-1][1] == "[DONE]"
    chunks = [json.loads(data) for _, data in called[:-1]]
    calls = [
        c["choices"][0]["delta"]["tool_calls"]
        for c in chunks
        if c["choices"] and "tool_calls" in c["choices"][0]["delta"]
    ]
    assert [
        (c[0]["function"]["name"], json.loads(c[0]["function"]["arguments"])) for c in calls
    ] == [("bash", {"command": "echo bench", "description": "bench"})]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0

    result = {"role": "tool", "tool_call_id": calls[0][0]["id"], "content": "bench"}
    answered = await sse(
        f"{url}/chat/completions", {"messages": [user, result], "tools": [BASH], "stream": True}
    )
    chunks = [json.loads(data) for _, data in answered[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert len(sent_stamps(text)) == 5
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] == 5


async def test_the_responses_api_calls_codexs_tool_then_streams_text_and_completes(
    model: tuple[FakeModel, str],
) -> None:
    _, url = model
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
    called = await sse(f"{url}/responses", {"input": [user], "tools": [EXEC], "stream": True})
    names = [name for name, _ in called]
    assert names == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    item = json.loads(called[2][1])["item"]
    assert (item["type"], item["name"], json.loads(item["arguments"])) == (
        "function_call",
        "exec_command",
        {"cmd": "echo bench"},
    )
    output = {"type": "function_call_output", "call_id": item["call_id"], "output": "bench"}
    answered = await sse(
        f"{url}/responses", {"input": [user, item, output], "tools": [EXEC], "stream": True}
    )
    events = [json.loads(data) for _, data in answered]
    assert [e["type"] for e in events] == [name for name, _ in answered]  # named as typed
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert len(sent_stamps(deltas)) == 5
    message = next(e["item"] for e in events if e["type"] == "response.output_item.done")
    assert message["content"][0]["text"] == deltas
    completed = events[-1]
    assert completed["type"] == "response.completed"
    assert completed["response"]["usage"]["output_tokens"] == 5
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


async def test_paced_pieces_are_sent_apart_and_counted_as_the_models_time(
    model: tuple[FakeModel, str],
) -> None:
    _, url = model
    async with aiohttp.ClientSession() as http:
        async with http.post(
            url.replace("/v1", "/bench/script"), json={"pace_ms": 20, "chunks": 3}
        ):
            pass
        result = {"role": "tool", "tool_call_id": "x", "content": "bench"}
        answered = await sse(f"{url}/chat/completions", {"messages": [result], "tools": [BASH]})
        text = "".join(
            json.loads(d)["choices"][0]["delta"].get("content", "")
            for _, d in answered[:-1]
            if json.loads(d)["choices"]
        )
        stamps = sent_stamps(text)
        assert len(stamps) == 3 and stamps == sorted(stamps)
        async with http.get(url.replace("/v1", "/bench/stats")) as response:
            stats = await response.json()
    # Two waits of 20 ms between the three pieces, inside the answer's time.
    assert stats["requests"] == 1 and stats["busy_s"] >= 0.04


async def test_a_request_without_tools_gets_a_few_words(model: tuple[FakeModel, str]) -> None:
    _, url = model
    answered = await sse(
        f"{url}/chat/completions", {"messages": [{"role": "user", "content": "title"}]}
    )
    text = "".join(
        json.loads(d)["choices"][0]["delta"].get("content", "")
        for _, d in answered[:-1]
        if json.loads(d)["choices"]
    )
    assert text == "Bench session "


async def test_bench_peers_measures_agenthost_through_its_gateway(tmp_path: Path) -> None:
    sizes = replace(peers.SMOKE, starts=0, short_sessions=1, concurrent_turns=1, chunks=20)
    model = await peers.Model.start()
    try:
        result = await peers.measure("agenthost", tmp_path, model, sizes)
        many = await peers.measure_many("agenthost", tmp_path, model, sizes)
    finally:
        await model.stop()
    figures = result.figures
    for key in (
        "start_s",
        "rss_start_mb",
        "pss_start_mb",
        "cpu_turn_burst_ms",
        "cpu_turn_paced_ms",
    ):
        assert figures[key] > 0, key
    assert figures["rss_used_mb"] >= figures["pss_used_mb"] > 0
    # Every chunk of every session reached the client, each with its delay.
    assert many["many_chunks_seen"] == 1.0
    table = peers.table({"agenthost": result}, sizes)
    assert "host CPU per turn, chunks paced 5 ms apart" in table
