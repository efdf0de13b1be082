"""What a request used, as the adapters report it; the context window they
know; a provider's "too long" refusal told apart from other refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.agentruntime.models.base import (
    Finish,
    ModelError,
    ModelRequest,
    Usage,
    UserMessage,
    estimate_tokens,
)
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply
from services.agentruntime.models.factory import adapter_from_env
from services.agentruntime.models.openai_compat import OpenAICompatConfig
from services.agentruntime.models.tests.conftest import MakeAdapter
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    context_overflow_reply,
    finish_chunk,
    text_chunk,
    usage_chunk,
)
from services.agentruntime.models.tests.support import collect, collect_until_error


def request(text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text)])


async def test_the_providers_usage_is_reported_before_finish_with_cached_tokens(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    provider.enqueue(
        ProviderReply(
            stream=[
                text_chunk("Hi"),
                finish_chunk("stop"),
                usage_chunk(1200, 30, cached=1024, model="deepseek-chat-v3"),
                DONE,
            ]
        )
    )
    chunks = await collect(make_adapter(), request(), usage=True)
    assert chunks[-2:] == [
        Usage(1200, 30, cached_prompt_tokens=1024, model="deepseek-chat-v3"),
        Finish("stop"),
    ]
    # Usage is asked for on every stream.
    assert provider.requests[0].body["stream_options"] == {"include_usage": True}


async def test_deepseeks_cache_hit_field_counts_as_cached(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    usage = usage_chunk(500, 7)
    usage["usage"] |= {"prompt_cache_hit_tokens": 320, "prompt_cache_miss_tokens": 180}
    provider.enqueue(ProviderReply(stream=[text_chunk("x"), finish_chunk("stop"), usage, DONE]))
    chunks = await collect(make_adapter(), request(), usage=True)
    assert Usage(500, 7, cached_prompt_tokens=320, model="deepseek-chat") in chunks


async def test_a_provider_without_usage_gets_an_estimate_marked_estimated(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    text = "x" * 4000
    provider.enqueue(ProviderReply(stream=[text_chunk("y" * 400), finish_chunk("stop"), DONE]))
    chunks = await collect(make_adapter(), request(text), usage=True)
    usage = next(c for c in chunks if isinstance(c, Usage))
    assert usage.estimated and usage.model == "deepseek-chat"
    # bytes / 4, as documented.
    assert usage.prompt_tokens == request(text).estimated_tokens() == 1008
    assert usage.completion_tokens == estimate_tokens("y" * 400, "")


@pytest.mark.parametrize("shape", ["openai", "deepseek"])
async def test_a_context_length_refusal_is_a_context_overflow(
    provider: FakeProvider, make_adapter: MakeAdapter, shape: str
) -> None:
    provider.enqueue(context_overflow_reply(8192, 9000, shape=shape))
    _, error = await collect_until_error(make_adapter(), request())
    assert error.context_overflow and error.status == 400 and not error.retryable
    assert "maximum context length is 8192 tokens" in error.message
    # Not retried: the same request would be refused again.
    assert len(provider.requests) == 1


async def test_other_bad_requests_are_no_overflow(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    provider.enqueue(ProviderReply(status=400, error_message="Invalid 'messages': empty"))
    _, error = await collect_until_error(make_adapter(), request())
    assert isinstance(error, ModelError) and not error.context_overflow


def test_the_window_comes_from_the_config_and_its_variables() -> None:
    env = {"AGENTHOST_MODEL_BASE_URL": "http://x/v1", "AGENTHOST_MODEL": "m"}
    default = OpenAICompatConfig.from_env(env)
    assert (default.context_window, default.max_output_tokens) == (128000, 8192)
    small = OpenAICompatConfig.from_env(env | {"AGENTHOST_MODEL_CONTEXT_WINDOW": "8000"})
    assert small.context_window == 8000
    with pytest.raises(ValueError, match="AGENTHOST_MODEL_CONTEXT_WINDOW='lots'"):
        OpenAICompatConfig.from_env(env | {"AGENTHOST_MODEL_CONTEXT_WINDOW": "lots"})


async def test_the_builtin_model_reports_an_estimate_and_its_window(tmp_path: Path) -> None:
    model = BuiltinAdapter([ScriptedReply(text="four")])
    chunks = await collect(model, request("hello"), usage=True)
    completion = estimate_tokens("four", "")
    assert chunks[-2] == Usage(
        request("hello").estimated_tokens(), completion, model="builtin-echo", estimated=True
    )
    assert model.context_window == 32000
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"context_window": 8000, "replies": [{"text": "a"}]}))
    assert BuiltinAdapter.from_script_file(script).context_window == 8000
    script.write_text(json.dumps({"context_window": "big", "replies": []}))
    with pytest.raises(ValueError, match="context_window is a whole number"):
        BuiltinAdapter.from_script_file(script)


def test_the_window_variable_sets_the_builtin_models_too_a_script_wins(tmp_path: Path) -> None:
    window = {"AGENTHOST_MODEL_CONTEXT_WINDOW": "16000"}
    assert adapter_from_env(window).context_window == 16000
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"context_window": 8000, "replies": []}))
    scripted = window | {"AGENTHOST_BUILTIN_SCRIPT": str(script)}
    assert adapter_from_env(scripted).context_window == 8000
    script.write_text(json.dumps({"replies": []}))
    assert adapter_from_env(scripted).context_window == 16000


async def test_a_context_length_error_inside_the_stream_is_an_overflow_too(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    failure = {"error": {"message": "prompt is too long: 9000 tokens > 8192 maximum"}}
    provider.enqueue(ProviderReply(stream=[failure, DONE]))
    _, error = await collect_until_error(make_adapter(), request())
    assert error.context_overflow and "prompt is too long" in error.message
