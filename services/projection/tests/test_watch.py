"""Watch: changes only when a view really changes, resumable without gap or duplicate."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing

import pytest

from services.common.errors import SessionNotFound, Unavailable
from services.planmode.events import command_done_event, plan_mode_event, plan_selection_event
from services.planmode.projection_unit import PlanProjectionUnit
from services.projection.engine import ProjectionEngine
from services.projection.errors import WatchLagged
from services.projection.model import CaughtUp, Change, WatchItem
from services.sessionlog.domain import SessionLog

from .conftest import EngineFactory, within
from .units import Event, UserTexts, title, turn_start, user


async def test_only_events_that_change_a_view_produce_frames(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    async with engine_factory() as engine, aclosing(engine.watch("s1")) as frames:
        assert await within(frames) == CaughtUp(-1)

        await log.append("s1", [turn_start()])  # 0: changes no unit's state
        await log.append("s1", [title("A")])  # 1: the title
        await log.append("s1", [title("A")])  # 2: the title unit's state, not its view
        await log.append("s1", [user()])  # 3: the message count

        # Frames arrive in seq order, so nothing came for seq 0 or 2.
        assert await within(frames) == Change("title", "A", 1)
        assert await within(frames) == Change("messages", {"count": 1}, 3)


async def test_the_events_of_one_append_send_the_latest_of_each_view_they_changed_once(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    # A batch of a hundred events would otherwise send a hundred steps of a
    # view that every client replaces with the last (the higher seq wins).
    await log.create_session("s1", "/w")
    async with (
        engine_factory() as engine,
        aclosing(engine.watch("s1")) as frames,
        aclosing(engine.watch_all()) as every,
    ):
        assert await within(frames) == CaughtUp(-1)
        assert await within(every) == CaughtUp(-1)
        await log.append("s1", [title("A"), user(), user(), title("B"), user()])
        await log.append("s1", [title("C")])

        latest = [Change("title", "B", 3), Change("messages", {"count": 3}, 4)]
        assert [await within(frames) for _ in latest] == latest
        assert await within(frames) == Change("title", "C", 5)
        everything: list[Change] = []
        while len(everything) < 3:  # what waits together comes as one list
            batch = await within(every)
            assert isinstance(batch, list)
            everything += [each.change for each in batch]
        assert everything == [*latest, Change("title", "C", 5)]


async def test_a_watcher_that_changes_a_view_it_was_sent_changes_no_later_answer(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    # Watchers share what they are sent (model.Change), but the engine's own
    # view, which gets and later frames come from, is not theirs to change.
    await log.create_session("s1", "/w")
    async with engine_factory(UserTexts()) as engine, aclosing(engine.watch("s1")) as frames:
        assert await within(frames) == CaughtUp(-1)
        await log.append("s1", [user("a")])

        sent = await within(frames)
        assert isinstance(sent, Change) and isinstance(sent.value, dict)
        sent.value["texts"][0]["text"] = "changed"
        sent.value["texts"].append({"text": "added"})

        assert (await engine.get("s1")).values["texts"] == {"texts": [{"text": "a"}]}
        await log.append("s1", [user("b")])
        assert await within(frames) == Change("texts", {"texts": [{"text": "a"}, {"text": "b"}]}, 1)


async def test_a_watch_from_an_older_seq_gets_the_latest_value_of_each_changed_view(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    await log.append("s1", [title("A"), user(), title("B"), user(), turn_start()])
    async with engine_factory() as engine:
        assert await first_frames(engine, after_seq=-1) == [
            Change("title", "B", 2),
            Change("messages", {"count": 2}, 3),
            CaughtUp(4),
        ]
        assert await first_frames(engine, after_seq=2) == [
            Change("messages", {"count": 2}, 3),
            CaughtUp(4),
        ]
        assert await first_frames(engine, after_seq=3) == [CaughtUp(4)]


async def first_frames(engine: ProjectionEngine, after_seq: int) -> list[Change | CaughtUp]:
    frames: list[Change | CaughtUp] = []
    async with aclosing(engine.watch("s1", after_seq)) as watch:
        while not frames or isinstance(frames[-1], Change):
            frames.append(await within(watch))
    return frames


async def test_resuming_from_the_last_seq_seen_repeats_nothing_and_misses_nothing(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    async with engine_factory() as engine:
        async with aclosing(engine.watch("s1")) as first:
            assert await within(first) == CaughtUp(-1)
            await log.append("s1", [title("A"), user(), turn_start()])  # 0, 1, 2
            seen = [await within(first), await within(first)]
        assert seen == [Change("title", "A", 0), Change("messages", {"count": 1}, 1)]

        await log.append("s1", [title("B"), user(), title("C")])  # 3, 4, 5: while away
        async with aclosing(engine.watch("s1", after_seq=1)) as second:
            assert await within(second) == Change("messages", {"count": 2}, 4)
            assert await within(second) == Change("title", "C", 5)
            assert await within(second) == CaughtUp(5)

            await log.append("s1", [user()])  # 6
            assert await within(second) == Change("messages", {"count": 3}, 6)


async def test_a_watcher_reconnecting_under_concurrent_appends_ends_with_every_latest_value(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    events = [title(f"t{n}") if n % 3 == 0 else user() for n in range(120)]
    events.append(title("end"))
    last_seq = len(events) - 1
    await log.create_session("s1", "/w")
    async with engine_factory() as engine, aclosing(engine.watch("s1")) as steady:
        assert await within(steady) == CaughtUp(-1)
        writer = asyncio.create_task(append_one_by_one(log, events))
        resumed = await follow_with_reconnects(engine, last_seq)
        reference = await follow(steady, last_seq)
        await writer

    assert [c.seq for c in resumed] == sorted({c.seq for c in resumed})  # no duplicate
    assert all(change in reference for change in resumed)  # real changes, at their seq
    assert latest_by_key(resumed) == latest_by_key(reference)  # no gap at the end
    assert latest_by_key(reference) == {
        "title": Change("title", "end", last_seq),
        "messages": Change("messages", {"count": 80}, 119),
    }


async def append_one_by_one(log: SessionLog, events: list[Event]) -> None:
    for event in events:
        await log.append("s1", [event])


async def follow_with_reconnects(engine: ProjectionEngine, last_seq: int) -> list[Change]:
    """Drop the connection every three frames; resume from the last seq seen."""
    changes: list[Change] = []
    after_seq = -1
    while after_seq < last_seq:
        async with aclosing(engine.watch("s1", after_seq)) as watch:
            for _ in range(3):
                frame = await within(watch)
                if isinstance(frame, Change):
                    changes.append(frame)
                    after_seq = frame.seq
                if after_seq >= last_seq:
                    break
    return changes


async def follow(watch: AsyncIterator[WatchItem], last_seq: int) -> list[Change]:
    changes: list[Change] = []
    while not changes or changes[-1].seq < last_seq:
        frame = await within(watch)
        assert isinstance(frame, Change)
        changes.append(frame)
    return changes


def latest_by_key(changes: list[Change]) -> dict[str, Change]:
    return {change.key: change for change in changes}


async def test_a_watcher_that_falls_behind_is_told_to_resume(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    async with engine_factory(watch_buffer=3) as engine:
        async with aclosing(engine.watch("s1")) as slow, aclosing(engine.watch("s1")) as fast:
            assert await within(slow) == CaughtUp(-1)
            assert await within(fast) == CaughtUp(-1)
            for n in range(5):
                await log.append("s1", [title(f"t{n}")])
                # `fast` keeps up; every change it sees was offered to `slow` too.
                assert await within(fast) == Change("title", f"t{n}", n)

            for n in range(3):
                assert await within(slow) == Change("title", f"t{n}", n)
            with pytest.raises(WatchLagged):
                await within(slow)

        async with aclosing(engine.watch("s1", after_seq=2)) as resumed:
            assert await within(resumed) == Change("title", "t4", 4)
            assert await within(resumed) == CaughtUp(4)


async def test_watching_an_unknown_session_fails(engine_factory: EngineFactory) -> None:
    async with engine_factory() as engine, aclosing(engine.watch("nope")) as watch:
        with pytest.raises(SessionNotFound):
            await within(watch)


async def test_stopping_the_engine_ends_watches_as_unavailable(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    async with engine_factory() as engine, aclosing(engine.watch("s1")) as watch:
        assert await within(watch) == CaughtUp(-1)
        await engine.stop()
        with pytest.raises(Unavailable):
            await within(watch)
        async with aclosing(engine.watch("s1")) as late:
            with pytest.raises(Unavailable):
                await within(late)


async def test_the_plan_unit_shows_a_pending_selection_and_its_commit(
    log: SessionLog, engine_factory: EngineFactory
) -> None:
    await log.create_session("s1", "/w")
    await log.append("s1", [plan_selection_event(True)])  # chosen while a turn runs
    async with engine_factory(PlanProjectionUnit()) as engine:
        # Folded from the log alone, with no checkpoint: the pending selection shows.
        assert await engine.get("s1") == (0, {"plan": {"active": False, "pending": True}})

        async with aclosing(engine.watch("s1", after_seq=0)) as watch:
            assert await within(watch) == CaughtUp(0)
            await log.append("s1", [command_done_event("c1", True, "Plan mode selected")])
            await log.append("s1", [plan_mode_event(True)])  # the boundary commits it
            assert await within(watch) == Change("plan", {"active": True}, 2)

            await log.append("s1", [plan_selection_event(False)])
            assert await within(watch) == Change("plan", {"active": True, "pending": False}, 3)
            await log.append("s1", [plan_selection_event(True)])
            assert await within(watch) == Change("plan", {"active": True}, 4)
