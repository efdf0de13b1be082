from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.agentruntime.models.base import ModelRequest, StreamedAnswer, UserMessage
from services.agentruntime.models.builtin import BuiltinAdapter
from services.agentruntime.models.factory import adapter_from_env, unreachable_reason
from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
from services.agentruntime.models.tests.fake_provider import FakeProvider
from services.agentruntime.models.tests.support import collect


async def test_builtin_is_the_default() -> None:
    adapter = adapter_from_env({})
    assert isinstance(adapter, BuiltinAdapter)
    assert (adapter.name, adapter.model) == ("builtin", "builtin-echo")


async def test_base_url_selects_the_openai_compatible_adapter() -> None:
    adapter = adapter_from_env(
        {
            "AGENTHOST_MODEL_BASE_URL": "https://api.deepseek.com",
            "AGENTHOST_MODEL": "deepseek-chat",
            "AGENTHOST_MODEL_API_KEY": "sk-secret",
        }
    )
    try:
        assert isinstance(adapter, OpenAICompatAdapter)
        assert (adapter.name, adapter.model) == ("openai-compatible", "deepseek-chat")
        assert adapter.config.completions_url == "https://api.deepseek.com/chat/completions"
        assert adapter.config.api_key == "sk-secret"
        assert "sk-secret" not in repr(adapter.config)
    finally:
        await adapter.aclose()


def test_openai_config_needs_a_model() -> None:
    with pytest.raises(ValueError, match="AGENTHOST_MODEL"):
        OpenAICompatConfig.from_env({"AGENTHOST_MODEL_BASE_URL": "https://api.deepseek.com"})


def test_openai_config_without_key_sends_none() -> None:
    config = OpenAICompatConfig.from_env(
        {"AGENTHOST_MODEL_BASE_URL": "http://127.0.0.1:9/v1/", "AGENTHOST_MODEL": "m"}
    )
    assert config.api_key is None
    assert config.completions_url == "http://127.0.0.1:9/v1/chat/completions"


@pytest.mark.parametrize("via_env", [True, False])
async def test_builtin_script_from_env_or_argument(tmp_path: Path, via_env: bool) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"text": "scripted"}]), encoding="utf-8")
    env = {"AGENTHOST_BUILTIN_SCRIPT": str(path)} if via_env else {}

    adapter = adapter_from_env(env, builtin_script=None if via_env else path)

    folded = StreamedAnswer()
    for chunk in await collect(adapter, ModelRequest(messages=[UserMessage("x")])):
        folded.add(chunk)
    assert folded.text == "scripted"


async def test_a_server_that_answers_is_reachable_whatever_its_status(
    provider: FakeProvider,
) -> None:
    assert await unreachable_reason(provider.url) is None


async def test_an_unreachable_model_server_says_why() -> None:
    closed = await unreachable_reason("http://127.0.0.1:9/v1", timeout_s=2)
    assert closed is not None and closed.startswith("ConnectionRefusedError")
    assert await unreachable_reason("ftp://example.invalid/v1") == (
        "not an http:// or https:// URL"
    )
    assert await unreachable_reason("http://127.0.0.1:port/v1") == (
        "not a URL (Port could not be cast to integer value as 'port')"
    )
