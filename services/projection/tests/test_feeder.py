"""The feeder: follows the log from where it stopped, never applying an event twice."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from services.projection.model import CaughtUp, Change
from services.sessionlog.domain import SessionLog

from .conftest import WAIT_S, EngineFactory, within
from .units import title, user


async def test_after_a_restart_the_feeder_resumes_where_it_stopped(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    async with engine_factory() as first, aclosing(first.watch("s1")) as frames:
        assert await within(frames) == CaughtUp(-1)
        await log.append("s1", [user(), user(), title("A")])
        # Folded together: the latest of each view.
        assert await within(frames) == Change("messages", {"count": 2}, 1)
        assert await within(frames) == Change("title", "A", 2)
        assert first.stats.events_received == 3  # the live frames came from the feeder

    async with engine_factory() as second:
        await asyncio.wait_for(second.wait_caught_up(), WAIT_S)
        assert second.stats.events_received == 0  # nothing was delivered again

        async with aclosing(second.watch("s1", after_seq=2)) as frames:
            assert await within(frames) == CaughtUp(2)
            await log.append("s1", [user()])
            assert await within(frames) == Change("messages", {"count": 3}, 3)

        assert await second.get("s1") == (3, {"messages": {"count": 3}, "title": "A"})
        assert second.stats.events_received == 1
        assert second.stats.events_read == 0  # the stop's checkpoint covered the rest


async def test_events_delivered_again_after_a_crash_are_applied_once(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    await log.create_session("s2", "/w")
    async with engine_factory(start=False, crash=True, checkpoint_every=4) as first:
        await log.append("s1", [user() for _ in range(6)])
        await first.get("s1")  # 6 events folded: checkpointed at seq 5
        await log.append("s1", [user() for _ in range(3)])
        await first.get("s1")  # 3 more, below the checkpoint interval: lost in the crash
    await log.append("s2", [title("other")])

    async with engine_factory(checkpoint_every=4) as second:
        # No position was ever stored: the whole log is delivered again.
        await asyncio.wait_for(second.wait_caught_up(), WAIT_S)
        assert second.stats.events_received == 10
        assert second.stats.events_skipped == 6  # already in the checkpoint
        assert second.stats.events_folded == 4
        assert await second.get("s1") == (8, {"messages": {"count": 9}, "title": None})
        assert await second.get("s2") == (0, {"messages": {"count": 0}, "title": "other"})
        assert second.stats.events_read == 0
