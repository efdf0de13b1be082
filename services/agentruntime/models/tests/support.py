"""Shared test settings and helpers to consume adapter streams, bounded in time."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from services.agentruntime.models.base import ModelAdapter, ModelChunk, ModelRequest

TIMEOUT_S = 5.0
API_KEY = "sk-test-key"
MODEL = "deepseek-chat"
# Small, so the retry tests stay quick.
MAX_ATTEMPTS = 3


async def collect(adapter: ModelAdapter, request: ModelRequest) -> list[ModelChunk]:
    async def consume() -> list[ModelChunk]:
        async with aclosing(adapter.stream(request)) as chunks:
            return [chunk async for chunk in chunks]

    return await asyncio.wait_for(consume(), TIMEOUT_S)


async def wait(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), TIMEOUT_S)
