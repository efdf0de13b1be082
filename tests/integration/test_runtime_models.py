"""The agent runtime service with the OpenAI-compatible adapter against a
local server speaking that protocol, and a deployment without plan mode."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.models.catalog import load_catalog
from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
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
from tests.support.events import kinds
from tests.support.rpc import expect_rpc_error, reason_of
from tests.support.stack import Stack, running_stack

SID = "s1"


@pytest.fixture
async def stack(tmp_path: Path, provider: FakeProvider) -> AsyncIterator[Stack]:
    model = OpenAICompatAdapter(
        OpenAICompatConfig(
            base_url=provider.url,
            model="deepseek-chat",
            api_key="sk-test",
            max_attempts=2,
            backoff_initial_s=0.0,
            idle_timeout_s=10.0,
            first_byte_timeout_s=10.0,
        )
    )
    async with running_stack(tmp_path, model=model) as running:
        await running.log.create_session(SID, "/work/project")
        yield running


def text_reply(*pieces: str) -> ProviderReply:
    return ProviderReply(
        stream=[
            chunk({"role": "assistant", "content": ""}),
            *(text_chunk(p) for p in pieces),
            finish_chunk("stop"),
            DONE,
        ]
    )


async def turn(stack: Stack, text: str) -> list[ev.Event]:
    await stack.runtime.Prompt(rt.PromptRequest(session_id=SID, text=text))
    await stack.wait_idle(SID)
    return (await stack.log.read(SID, limit=1000)).events


async def test_streamed_text_is_recorded_as_the_answer(
    stack: Stack, provider: FakeProvider
) -> None:
    provider.enqueue(text_reply("Hello ", "from ", "the model."))
    log = await turn(stack, "hi")
    answers = [e.assistant_message.text for e in log if e.HasField("assistant_message")]
    assert answers == ["Hello from the model."]
    body = provider.requests[0].body
    assert body["model"] == "deepseek-chat" and body["stream"] is True
    assert body["messages"][-1] == {"role": "user", "content": "hi"}
    names = [t["function"]["name"] for t in body["tools"]]
    assert names == [
        "read_file",
        "list_dir",
        "glob",
        "grep",
        "write_file",
        "edit_file",
        "shell",
        "exit_plan_mode",
        "skill",
        "todo_write",
        "job_output",
        "job_wait",
        "job_kill",
        "terminal_open",
        "terminal_send",
        "terminal_read",
        "terminal_close",
        "task",
    ]


async def test_tool_call_round_trip(stack: Stack, provider: FakeProvider) -> None:
    provider.enqueue(
        ProviderReply(
            stream=[
                chunk({"role": "assistant", "content": None}),
                tool_fragment(0, call_id="call_1", name="exit_plan_mode", arguments='{"plan"'),
                tool_fragment(0, arguments=': "# Plan"}'),
                finish_chunk("tool_calls"),
                DONE,
            ]
        ),
        text_reply("Understood."),
    )
    log = await turn(stack, "finish planning")
    assert kinds(log).count("request_header") == 2
    result = next(e.tool_result for e in log if e.HasField("tool_result"))
    assert result.call_id == "call_1" and not result.ok  # not in plan mode
    second = provider.requests[1].body["messages"]
    assert second[-2]["tool_calls"][0]["id"] == "call_1"
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1", "content": result.error}


async def test_an_http_error_ends_the_turn_with_a_recorded_error(
    stack: Stack, provider: FakeProvider
) -> None:
    provider.enqueue(ProviderReply(status=400, error_message="Model Not Exist"))
    log = await turn(stack, "hi")
    end = log[-1].turn_end
    assert end.reason == ev.TURN_END_REASON_ERROR and "Model Not Exist" in end.error
    provider.enqueue(text_reply("fine now"))
    log = await turn(stack, "again")
    assert log[-1].turn_end.reason == ev.TURN_END_REASON_COMPLETED


async def test_without_plan_mode_prompts_work_with_no_plan_behaviour(tmp_path: Path) -> None:
    async with running_stack(tmp_path, with_plan_mode=False) as stack:
        await stack.log.create_session(SID, "/w")
        commands = await stack.runtime.ListCommands(rt.ListCommandsRequest(session_id=SID))
        names = [c.name for c in commands.commands]
        assert names[:2] == ["compact", "permissions"] and "plan" not in names
        log = await turn(stack, "hello")
        header = next(e.request_header for e in log if e.HasField("request_header"))
        # The workspace tools, and no plan-mode tool or section.
        assert "exit_plan_mode" not in {t.name for t in header.tools}
        assert [s.id for s in header.sections] == ["agenthost:base"]
        assert json.dumps(kinds(log)).count("assistant_message") == 1


MODELS_FILE = """
[providers.fake]
base_url = "{url}"
api_key_env = "FAKE_PROVIDER_KEY"

[models.builtin]
provider = "builtin"

[models.remote]
provider = "fake"
id = "deepseek-chat"
context_window = 64000
max_output_tokens = 4000
[models.remote.prices]
input = 0.27
output = 1.10
"""


async def test_a_session_switches_between_configured_models(
    tmp_path: Path, provider: FakeProvider
) -> None:
    path = tmp_path / "models.toml"
    path.write_text(MODELS_FILE.format(url=provider.url))
    catalog = load_catalog(path, {"FAKE_PROVIDER_KEY": "sk-fake"})
    async with running_stack(tmp_path / "data", model=catalog) as stack:
        await stack.log.create_session(SID, "/work/project")
        listed = await stack.runtime.ListModels(rt.ListModelsRequest(session_id=SID))
        assert [(m.name, m.provider, m.is_default) for m in listed.models] == [
            ("builtin", "builtin", True),
            ("remote", "fake", False),
        ]
        remote = listed.models[1]
        assert (remote.provider_model, remote.context_window, remote.max_output_tokens) == (
            "deepseek-chat",
            64000,
            4000,
        )
        assert (remote.prices.input, remote.prices.output) == (0.27, 1.10)
        assert not remote.prices.HasField("cached_input")
        assert not listed.models[0].HasField("prices")

        await turn(stack, "first")
        assert provider.requests == []  # the default, built-in model answered

        switch = rt.UpdateSettingsRequest(session_id=SID, model="remote")
        reply = await stack.runtime.UpdateSettings(switch)
        assert reply.settings.model == "remote"
        reply = text_reply("From the remote model.")
        reply.stream.insert(-1, usage_chunk(prompt=1200, completion=300))
        provider.enqueue(reply)
        log = await turn(stack, "second")
        headers = [e.request_header.model for e in log if e.HasField("request_header")]
        assert headers == ["builtin-echo", "deepseek-chat"]
        # Usage under the models file's name (and the provider's id), priced
        # at that model's prices; the built-in model has none.
        used = [e.model_usage for e in log if e.HasField("model_usage")]
        assert [(u.model, u.HasField("cost")) for u in used] == [
            ("builtin (builtin-echo)", False),
            ("remote (deepseek-chat)", True),
        ]
        assert (used[1].prompt_tokens, used[1].completion_tokens) == (1200, 300)
        assert used[1].context_window == 64000
        assert used[1].cost == pytest.approx((1200 * 0.27 + 300 * 1.10) / 1_000_000)
        assert provider.requests[0].body["model"] == "deepseek-chat"
        assert provider.requests[0].headers.get("authorization") == "Bearer sk-fake"
        answers = [e.assistant_message.text for e in log if e.HasField("assistant_message")]
        assert answers[-1] == "From the remote model."

        # An unknown name is refused, typed, and nothing is logged.
        last = (await stack.log.get_session(SID)).last_seq
        unknown = rt.UpdateSettingsRequest(session_id=SID, model="gpt-9")
        refused = await expect_rpc_error(
            stack.runtime.UpdateSettings(unknown), grpc.StatusCode.INVALID_ARGUMENT
        )
        assert reason_of(refused) == "UNKNOWN_MODEL"
        assert "builtin, remote" in (refused.details() or "")
        assert (await stack.log.get_session(SID)).last_seq == last

        # Back to the default: the built-in model answers again.
        await stack.runtime.UpdateSettings(rt.UpdateSettingsRequest(session_id=SID, model=""))
        log = await turn(stack, "third")
        headers = [e.request_header.model for e in log if e.HasField("request_header")]
        assert headers[-1] == "builtin-echo" and len(provider.requests) == 1
