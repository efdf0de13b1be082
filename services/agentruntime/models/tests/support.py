"""Shared test settings and helpers to consume adapter streams, bounded in time."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from services.agentruntime.models.base import (
    ModelAdapter,
    ModelChunk,
    ModelError,
    ModelRequest,
    Usage,
)

TIMEOUT_S = 5.0
API_KEY = "sk-test-key"
MODEL = "deepseek-chat"
# Small, so the retry tests stay quick.
MAX_ATTEMPTS = 3


async def collect(
    adapter: ModelAdapter, request: ModelRequest, *, usage: bool = False
) -> list[ModelChunk]:
    """The stream's chunks; its Usage too only when `usage` (the tests of
    what a stream says leave it out; test_usage.py checks it)."""

    async def consume() -> list[ModelChunk]:
        async with aclosing(adapter.stream(request)) as chunks:
            return [chunk async for chunk in chunks if usage or not isinstance(chunk, Usage)]

    return await asyncio.wait_for(consume(), TIMEOUT_S)


async def collect_timed(
    adapter: ModelAdapter, request: ModelRequest
) -> list[tuple[float, ModelChunk]]:
    """Each chunk with the event-loop time it was received at."""
    loop = asyncio.get_running_loop()

    async def consume() -> list[tuple[float, ModelChunk]]:
        async with aclosing(adapter.stream(request)) as chunks:
            return [(loop.time(), chunk) async for chunk in chunks if not isinstance(chunk, Usage)]

    return await asyncio.wait_for(consume(), TIMEOUT_S)


async def collect_until_error(
    adapter: ModelAdapter, request: ModelRequest
) -> tuple[list[ModelChunk], ModelError]:
    """The chunks received before the stream failed, and its error."""
    seen: list[ModelChunk] = []

    async def consume() -> None:
        async with aclosing(adapter.stream(request)) as chunks:
            async for chunk in chunks:
                seen.append(chunk)

    try:
        await asyncio.wait_for(consume(), TIMEOUT_S)
    except ModelError as error:
        return seen, error
    raise AssertionError(f"the stream did not fail; it sent {seen}")


async def wait(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), TIMEOUT_S)
