"""The group committer's queue on its own, over a stand-in backend that
records the waves it is asked to commit: how waves are cut, ordered, retried
and closed. What a wave means for the data is in tests/contract."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from services.sessionlog.append_plan import AppendRequest, Outcome
from services.sessionlog.group_commit import GroupCommitter
from services.sessionlog.port import AppendResult
from services.sessionlog.store import SessionHeader
from tests.support.events import user


def request(session_id: str, size: int = 1) -> AppendRequest:
    events = [user(f"{session_id}-{n}", event_id=f"{session_id}-{n}") for n in range(size)]
    return AppendRequest(SessionHeader(session_id, "/w", 0), events, None, 0)


class Backend:
    """Commits every wave it is given; `hold` keeps the next one waiting."""

    def __init__(self) -> None:
        self.waves: list[list[str]] = []
        self.hold: asyncio.Event | None = None
        self.holding = asyncio.Event()
        self.refuse_waves_with = ""

    async def commit(self, requests: Sequence[AppendRequest]) -> list[Outcome]:
        ids = [r.header.id for r in requests]
        self.waves.append(ids)
        if self.hold is not None:
            self.holding.set()
            await self.hold.wait()
            self.hold = None
        if self.refuse_waves_with in ids:
            raise RuntimeError("the database refused a row")
        return [AppendResult([0], 0, duplicate=False) for _ in requests]


async def _nothing() -> None:
    return None


async def after_earlier_tasks_started() -> None:
    """Tasks take their first step in the order they were created: once a
    task created now has finished, every task created before it has run up
    to its first wait (for an append: it has queued its batch)."""
    await asyncio.create_task(_nothing())


async def test_appends_queued_together_form_waves_of_bounded_size() -> None:
    backend = Backend()
    committer = GroupCommitter(backend.commit, max_events=3)
    sizes = [1, 1, 1, 1, 5, 2]
    await asyncio.gather(*(committer.append(request(f"s{n}", k)) for n, k in enumerate(sizes)))
    # s4 is larger than the bound: a wave of its own, never split.
    assert backend.waves == [["s0", "s1", "s2"], ["s3"], ["s4"], ["s5"]]
    assert (committer.stats.transactions, committer.stats.appends) == (4, 6)


async def test_a_write_alone_keeps_its_place_in_the_queue() -> None:
    backend = Backend()
    committer = GroupCommitter(backend.commit)

    async def fork() -> str:
        backend.waves.append(["fork"])
        return "forked"

    results = await asyncio.gather(
        committer.append(request("a")),
        committer.append(request("b")),
        committer.alone(fork),
        committer.append(request("c")),
    )
    assert backend.waves == [["a", "b"], ["fork"], ["c"]]
    assert results[2] == "forked"


async def test_appends_arriving_during_a_commit_form_the_next_wave() -> None:
    backend = Backend()
    backend.hold = asyncio.Event()
    committer = GroupCommitter(backend.commit)
    first = asyncio.create_task(committer.append(request("first")))
    await backend.holding.wait()
    later = [asyncio.create_task(committer.append(request(f"later{n}"))) for n in range(3)]
    await after_earlier_tasks_started()
    gives_up = asyncio.create_task(committer.append(request("gives-up")))
    await after_earlier_tasks_started()
    gives_up.cancel()
    backend.hold.set()
    await asyncio.gather(first, *later)
    # A caller that gave up before its wave began is left out of it.
    assert backend.waves == [["first"], ["later0", "later1", "later2"]]
    assert gives_up.cancelled()


async def test_a_wave_refused_as_a_whole_is_retried_one_batch_at_a_time() -> None:
    backend = Backend()
    backend.refuse_waves_with = "bad"
    committer = GroupCommitter(backend.commit)
    outcomes = await asyncio.gather(
        *(committer.append(request(name)) for name in ("good", "bad", "fine")),
        return_exceptions=True,
    )
    assert backend.waves == [["good", "bad", "fine"], ["good"], ["bad"], ["fine"]]
    assert isinstance(outcomes[1], RuntimeError)
    assert outcomes[0] == outcomes[2] == AppendResult([0], 0, duplicate=False)


async def test_close_finishes_queued_writes_then_refuses_new_ones() -> None:
    backend = Backend()
    backend.hold = asyncio.Event()
    committer = GroupCommitter(backend.commit)
    first = asyncio.create_task(committer.append(request("first")))
    await backend.holding.wait()
    queued = asyncio.create_task(committer.append(request("queued")))
    await after_earlier_tasks_started()
    closing = asyncio.create_task(committer.close())
    backend.hold.set()
    await closing
    assert first.done() and queued.done() and backend.waves == [["first"], ["queued"]]
    with pytest.raises(RuntimeError, match="closed"):
        await committer.append(request("late"))
