"""A real in-process session log on a SQLite file, and engines over it
keeping their checkpoints on each backend (a SQLite file, a PostgreSQL
schema of its own)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from services.projection.checkpoint_store import CheckpointStore
from services.projection.engine import ProjectionEngine
from services.projection.registry import UnitRegistry
from services.projection.unit import ProjectionUnit
from services.sessionlog.domain import SessionLog, open_session_log
from tests.support.stores import StoreBackend

from .units import MessageCounter, TitleUnit

T = TypeVar("T")
WAIT_S = 10.0

EngineFactory = Callable[..., AbstractAsyncContextManager[ProjectionEngine]]


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[SessionLog]:
    async with open_session_log(tmp_path / "log.db") as session_log:
        yield session_log


@pytest.fixture
def engine_factory(
    log: SessionLog, checkpoint_backend: StoreBackend[CheckpointStore]
) -> EngineFactory:
    """Engines sharing one checkpoint store: a new engine is a restart."""

    @asynccontextmanager
    async def make(
        *units: ProjectionUnit[Any], start: bool = True, crash: bool = False, **options: Any
    ) -> AsyncIterator[ProjectionEngine]:
        # crash: leave without stop(), so nothing is checkpointed on the way out
        # (only for an engine without a feeder, which then leaves nothing running).
        assert not (start and crash)
        registry = UnitRegistry(units or (MessageCounter(), TitleUnit()))
        async with checkpoint_backend.opened() as store:
            engine = ProjectionEngine(log, registry, store, **options)
            if start:
                await engine.start()
            try:
                yield engine
            finally:
                if not crash:
                    await engine.stop()

    return make


async def within(awaitable: AsyncIterator[T]) -> T:
    """The next item of an iterator, failing the test instead of hanging."""
    return await asyncio.wait_for(anext(awaitable), WAIT_S)
