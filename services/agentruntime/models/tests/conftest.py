from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
from services.agentruntime.models.tests.fake_provider import FakeProvider, serving
from services.agentruntime.models.tests.support import API_KEY, MAX_ATTEMPTS, MODEL

MakeAdapter = Callable[..., OpenAICompatAdapter]


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    async with serving() as server:
        yield server


@pytest.fixture
async def make_adapter(provider: FakeProvider) -> AsyncIterator[MakeAdapter]:
    """Adapters on the fake provider; keyword arguments override config fields."""
    made: list[OpenAICompatAdapter] = []

    def make(**overrides: Any) -> OpenAICompatAdapter:
        settings: dict[str, Any] = {
            "base_url": provider.url,
            "model": MODEL,
            "api_key": API_KEY,
            "max_attempts": MAX_ATTEMPTS,
            "backoff_initial_s": 0.0,
            "first_byte_timeout_s": 10.0,
            "idle_timeout_s": 10.0,
        }
        made.append(OpenAICompatAdapter(OpenAICompatConfig(**(settings | overrides))))
        return made[-1]

    yield make
    for model in made:
        await model.aclose()


@pytest.fixture
def adapter(make_adapter: MakeAdapter) -> OpenAICompatAdapter:
    return make_adapter()
