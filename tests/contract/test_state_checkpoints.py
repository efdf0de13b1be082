"""A cold load of a session's state reads its checkpoint and the events after
it, never the whole log, on every backend; and the state it gives is the one
a fold of the whole log gives."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core import folds
from services.common.errors import SessionNotFound
from services.sessionlog.domain import CHECKPOINT_EVERY, SessionLog
from services.sessionlog.port import Direction
from services.sessionlog.store import SharedStore, StateCheckpoint
from tests.support.events import a_working_session, plan_mode, title, user
from tests.support.stores import OpenLog

BATCH = 37  # not a divisor of CHECKPOINT_EVERY: batches straddle its multiples


async def append_events(
    log: SessionLog, session_id: str, count: int, source: Iterator[ev.Event]
) -> None:
    left = count
    while left:
        batch = list(itertools.islice(source, min(BATCH, left)))
        await log.append(session_id, batch)
        await log.renew_due_checkpoints()  # what the service's background task does
        left -= len(batch)


async def whole_fold(log: SessionLog, session_id: str) -> folds.SessionState:
    result = await log.read(session_id, from_seq=0, direction=Direction.FORWARD, limit=1_000_000)
    return folds.fold_events(folds.SessionState(), result.events)


async def test_a_cold_load_reads_only_the_tail_after_the_checkpoint(reopen: OpenLog) -> None:
    log = await reopen()
    await log.create_session("s", "/w")
    source = a_working_session()
    await append_events(log, "s", 20 * CHECKPOINT_EVERY + 11, source)
    expected = await whole_fold(log, "s")

    log = await reopen()  # a restart: nothing cached
    state = await log.load_state("s")
    assert state == expected
    assert state.last_seq == 20 * CHECKPOINT_EVERY + 10
    assert log.stats.events_read < CHECKPOINT_EVERY + BATCH


async def test_where_only_this_log_appends_a_renewal_reads_nothing_back(reopen: OpenLog) -> None:
    # The log keeps the fold of a session it renewed, folding each append on
    # as it commits; where another replica may append (a shared store), the
    # renewal reads the events after the checkpoint instead.
    log = await reopen()
    await log.create_session("s", "/w")
    source = a_working_session()
    await append_events(log, "s", CHECKPOINT_EVERY + 1, source)  # the first renewal reads
    read_before = log.stats.events_read
    await append_events(log, "s", 5 * CHECKPOINT_EVERY, source)
    read_back = log.stats.events_read - read_before
    if isinstance(log._store, SharedStore):
        assert read_back >= 4 * CHECKPOINT_EVERY
    else:
        assert read_back == 0
    assert log.stats.checkpoints_saved == 6
    saved = await log._store.load_checkpoint("s")
    assert saved is not None and saved.seq == 6 * CHECKPOINT_EVERY
    assert folds.load_state(saved.state) == await whole_fold(log, "s")


async def test_an_append_that_did_not_come_through_this_log_is_in_the_next_checkpoint(
    log: SessionLog,
) -> None:
    await log.create_session("s", "/w")
    source = a_working_session()
    await append_events(log, "s", CHECKPOINT_EVERY + 1, source)
    other_writer = SessionLog(log._store)  # behind the back of this log's kept fold
    compaction = ev.Compaction(summary="so far", up_to_seq=CHECKPOINT_EVERY, trigger="auto")
    other = await other_writer.append("s", [ev.Event(compaction=compaction)])
    await append_events(log, "s", CHECKPOINT_EVERY, source)

    saved = await log._store.load_checkpoint("s")
    assert saved is not None and saved.seq > other.last_seq
    state = folds.load_state(saved.state)
    assert state.last_compaction_seq == other.last_seq  # no later event changes it
    assert state == await whole_fold(log, "s")


async def test_an_append_stands_when_folding_it_into_the_kept_fold_fails(
    log: SessionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    await log.create_session("s", "/w")
    source = a_working_session()
    await append_events(log, "s", CHECKPOINT_EVERY + 1, source)

    def a_folds_bug(*args: object) -> folds.SessionState:
        raise RuntimeError("a fold's bug")

    with monkeypatch.context() as patched:
        patched.setattr(folds, "fold_events", a_folds_bug)
        result = await log.append("s", [user("kept all the same")])
    assert not result.duplicate
    await append_events(log, "s", CHECKPOINT_EVERY, source)

    saved = await log._store.load_checkpoint("s")
    assert saved is not None and saved.seq > result.last_seq
    assert folds.load_state(saved.state) == await whole_fold(log, "s")


async def test_without_renewals_a_load_saves_the_checkpoint_the_next_load_starts_from(
    reopen: OpenLog,
) -> None:
    log = await reopen()
    await log.create_session("s", "/w")
    source = a_working_session()
    for _ in range(30):  # appends whose renewals never ran (a crash, say)
        await log.append("s", list(itertools.islice(source, 100)))

    log = await reopen()
    first = await log.load_state("s")
    assert log.stats.events_read == 3000  # no checkpoint yet: the whole log, once
    await log.append("s", list(itertools.islice(source, 5)))

    log = await reopen()
    second = await log.load_state("s")
    # A shared store's load reads from the checkpoint's own last event on
    # (its position is what a kept fold is checked by): one more.
    assert log.stats.events_read == 5 + isinstance(log._store, SharedStore)
    assert second == folds.fold_events(first, (await log.read("s", from_seq=3000)).events)
    assert second == await whole_fold(log, "s")


async def test_a_checkpoint_of_another_state_version_is_refolded(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [user("hi"), plan_mode(True)])
    stale = StateCheckpoint(1, folds.STATE_VERSION + 1, b'{"from": "another release"}')
    await log._store.save_checkpoint("s", stale)
    state = await log.load_state("s")
    assert state.plan.active and not state.blank and state.last_seq == 1


async def test_a_store_keeps_the_newest_checkpoint_and_none_for_unknown_sessions(
    log: SessionLog,
) -> None:
    store = log._store
    await log.create_session("s", "/w")
    await log.append("s", [user("hi")])
    version = folds.STATE_VERSION
    await store.save_checkpoint("s", StateCheckpoint(5, version, b"new"))
    await store.save_checkpoint("s", StateCheckpoint(3, version, b"old"))
    assert await store.load_checkpoint("s") == StateCheckpoint(5, version, b"new")
    await store.save_checkpoint("s", StateCheckpoint(4, version + 1, b"other format"))
    assert await store.load_checkpoint("s") == StateCheckpoint(4, version + 1, b"other format")
    await store.save_checkpoint("never-stored", StateCheckpoint(1, version, b"x"))
    assert await store.load_checkpoint("never-stored") is None


async def test_a_deleted_session_takes_its_checkpoint_along(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    await log.append("s", list(itertools.islice(a_working_session(), CHECKPOINT_EVERY + 1)))
    await log.renew_due_checkpoints()
    assert await log._store.load_checkpoint("s") is not None
    await log.delete_session("s")
    assert await log._store.load_checkpoint("s") is None
    with pytest.raises(SessionNotFound):
        await log.load_state("s")
    await log.create_session("s", "/elsewhere")  # the id again: a new, blank session
    await log.append("s", [title("fresh")])
    state = await log.load_state("s")
    assert (state.title, state.blank, state.last_seq) == ("fresh", True, 0)


async def test_a_fork_folds_its_own_log(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    await log.append("s", list(itertools.islice(a_working_session(), 2 * CHECKPOINT_EVERY)))
    await log.renew_due_checkpoints()
    fork = await log.fork("s", up_to_seq=CHECKPOINT_EVERY + 3)
    state = await log.load_state(fork.id)
    assert state == await whole_fold(log, fork.id)
    assert state.last_seq == CHECKPOINT_EVERY + 3


async def test_a_lazy_session_has_the_blank_state(log: SessionLog) -> None:
    await log.create_session("lazy", "/w")
    assert await log.load_state("lazy") == folds.SessionState()
    with pytest.raises(SessionNotFound):
        await log.load_state("unknown")
