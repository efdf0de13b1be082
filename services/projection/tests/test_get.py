"""Get: the views of a session, consistent with its log, cheap after a restart."""

from __future__ import annotations

import time

import pytest

from services.common.errors import SessionNotFound
from services.projection.engine import CHECKPOINT_BYTES_PER_EVENT
from services.projection.errors import ProjectionFailed
from services.sessionlog.domain import SessionLog

from .conftest import EngineFactory
from .units import (
    Event,
    MessageCounter,
    TitleUnit,
    UserMessageCounter,
    UserTexts,
    assistant,
    title,
    user,
)


async def test_a_get_right_after_an_append_reflects_it(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    async with engine_factory() as engine:  # the feeder runs alongside
        await log.append("s1", [user(), title("Fix the build")])
        assert await engine.get("s1") == (1, {"messages": {"count": 1}, "title": "Fix the build"})

        await log.append("s1", [assistant()])
        assert await engine.get("s1") == (2, {"messages": {"count": 2}, "title": "Fix the build"})


async def test_an_unknown_session_is_not_found(engine_factory: EngineFactory) -> None:
    async with engine_factory() as engine:
        with pytest.raises(SessionNotFound):
            await engine.get("nope")


async def test_a_session_without_events_shows_the_initial_views(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("new", "/w")
    async with engine_factory() as engine:
        assert await engine.get("new") == (-1, {"messages": {"count": 0}, "title": None})


async def test_get_can_ask_for_some_units_and_ignores_unmounted_ones(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    await log.append("s1", [title("A")])
    async with engine_factory() as engine:
        assert await engine.get("s1", keys=["title", "plan"]) == (0, {"title": "A"})


async def test_a_caller_cannot_change_the_served_views(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    await log.append("s1", [user()])
    async with engine_factory() as engine:
        messages = (await engine.get("s1")).values["messages"]
        assert isinstance(messages, dict)
        messages["count"] = 99

        assert (await engine.get("s1")).values["messages"] == {"count": 1}


async def test_a_cold_get_of_a_100k_event_session_after_a_restart_reads_from_the_checkpoint(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    every = 3000
    await log.create_session("big", "/w")
    batch = [user() for _ in range(1000)]
    for _ in range(100):
        await log.append("big", batch)

    started = time.monotonic()
    async with engine_factory(start=False, crash=True, checkpoint_every=every) as first:
        assert await first.get("big") == (99_999, {"messages": {"count": 100_000}, "title": None})
        assert first.stats.events_read == 100_000
    # The process died: only the periodic checkpoints were taken.

    await log.append("big", [title("Long one"), user()])
    async with engine_factory(start=False, checkpoint_every=every) as second:
        expected = (100_001, {"messages": {"count": 100_001}, "title": "Long one"})
        assert await second.get("big") == expected
        assert second.stats.events_read <= every + 2  # at most one interval, plus the new ones
    # A clean stop checkpoints everything.

    async with engine_factory(start=False) as third:
        assert await third.get("big") == expected
        assert third.stats.events_read == 0
    assert time.monotonic() - started < 30


async def test_a_big_state_is_checkpointed_after_as_many_more_events_as_it_is_big(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    # Each text adds two events' worth of checkpoint (its JSON takes 512 bytes).
    text = "x" * (2 * CHECKPOINT_BYTES_PER_EVENT - 4)
    await log.create_session("s1", "/w")
    async with engine_factory(UserTexts(), start=False, crash=True, checkpoint_every=4) as first:
        for _ in range(40):
            await log.append("s1", [user(text)])
            await first.get("s1")
        # At 4 events (the minimum), then 8 later (the 2 kB it saved), then
        # 24 later (6 kB); the next would wait for 72. Every 4: ten.
        assert first.stats.checkpoints_written == 3
    # The process died: a restart refolds what came after the last, at 36.

    async with engine_factory(UserTexts(), start=False) as second:
        assert await second.get("s1") == (39, {"texts": {"texts": [{"text": text}] * 40}})
        assert second.stats.events_read == 4


async def test_a_new_state_version_refolds_that_unit_and_keeps_the_others(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    await log.append("s1", [user(), assistant(), title("A"), user()])
    async with engine_factory(MessageCounter(), TitleUnit(), start=False) as first:
        assert await first.get("s1") == (3, {"messages": {"count": 3}, "title": "A"})

    title_unit = TitleUnit()
    async with engine_factory(UserMessageCounter(), title_unit, start=False) as second:
        # Version 2 counts only the user's messages: refolded from seq 0.
        assert await second.get("s1") == (3, {"messages": {"count": 2}, "title": "A"})
        assert second.stats.events_read == 4
        assert title_unit.applied == 0  # the title came from its checkpoint

    async with engine_factory(UserMessageCounter(), TitleUnit(), start=False) as third:
        assert await third.get("s1") == (3, {"messages": {"count": 2}, "title": "A"})
        assert third.stats.events_read == 0


class FailsOnBoom(TitleUnit):
    key = "boom"

    def apply(self, state: tuple[str | None, int], event: Event) -> tuple[str | None, int]:
        if event.session_title.title == "boom":
            raise ValueError("boom")
        return super().apply(state, event)


async def test_a_failing_unit_fails_its_session_only(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("bad", "/w")
    await log.create_session("good", "/w")
    async with engine_factory(FailsOnBoom(), MessageCounter()) as engine:
        await log.append("bad", [user(), title("boom")])
        await log.append("good", [user()])

        with pytest.raises(ProjectionFailed) as raised:
            await engine.get("bad")
        assert raised.value.metadata == {"session_id": "bad", "seq": "1", "key": "boom"}
        assert await engine.get("good") == (0, {"boom": None, "messages": {"count": 1}})


async def test_a_session_evicted_from_memory_comes_back_from_its_checkpoint(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    for session_id in ("s1", "s2"):
        await log.create_session(session_id, "/w")
        await log.append(session_id, [user() for _ in range(5)])
    async with engine_factory(start=False, max_cached_sessions=1) as engine:
        await engine.get("s1")
        await engine.get("s2")  # s1 leaves memory, checkpointed on the way out
        assert engine.stats.checkpoints_written == 1
        await log.append("s1", [title("back")])
        read_before = engine.stats.events_read

        assert await engine.get("s1") == (5, {"messages": {"count": 5}, "title": "back"})
        assert engine.stats.events_read - read_before == 1  # not refolded from seq 0


async def test_a_get_as_of_a_seq_already_folded_does_not_read_the_log(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    await log.append("s1", [user(), title("A")])
    async with engine_factory(start=False) as engine:  # no feed: only reads fold
        assert await engine.get("s1", min_seq=1) == (1, {"messages": {"count": 1}, "title": "A"})
        reads = engine.stats.log_reads
        assert await engine.get("s1", min_seq=1) == (1, {"messages": {"count": 1}, "title": "A"})
        assert await engine.get("s1", min_seq=0) == (1, {"messages": {"count": 1}, "title": "A"})
        assert engine.stats.log_reads == reads
        await log.append("s1", [assistant()])
        assert await engine.get("s1", min_seq=2) == (2, {"messages": {"count": 2}, "title": "A"})
