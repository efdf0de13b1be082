from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
from services.agentruntime.models.tests.fake_provider import FakeProvider
from services.agentruntime.models.tests.support import API_KEY, MAX_ATTEMPTS, MODEL


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    server = FakeProvider()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def adapter(provider: FakeProvider) -> AsyncIterator[OpenAICompatAdapter]:
    config = OpenAICompatConfig(
        base_url=provider.url,
        model=MODEL,
        api_key=API_KEY,
        max_attempts=MAX_ATTEMPTS,
        backoff_initial_s=0.0,
        read_timeout_s=10.0,
    )
    model = OpenAICompatAdapter(config)
    yield model
    await model.aclose()
