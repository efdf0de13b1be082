"""Group commit, on every backend: appends that arrive together share one
transaction, and each caller is answered as if its batch had been alone.

Appends started together with asyncio.gather all reach the store's write
queue before its drain task first runs (the task is scheduled behind them),
so they form one wave for certain: the tests below that count transactions
do not depend on timing. The stress test lets waves form however the
scheduling goes and checks only what every caller was promised.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.common.errors import DomainError, EventIdConflict, WrongExpectedSeq
from services.sessionlog.domain import SessionLog
from services.sessionlog.port import AppendResult, Direction
from services.sessionlog.store import Event, SessionHeader
from tests.support.events import user
from tests.support.stores import OpenLog, Store

NOW_US = 1_700_000_000_000_000


@dataclass(frozen=True)
class Batch:
    session_id: str
    event_ids: tuple[str, ...]
    expected_last_seq: int | None = None

    def events(self) -> list[Event]:
        return [user(i, event_id=i) for i in self.event_ids]


def batch(session_id: str, name: str, size: int, expected: int | None = None) -> Batch:
    return Batch(session_id, tuple(f"{name}-{n}" for n in range(size)), expected)


async def append(store: Store, b: Batch) -> AppendResult:
    header = SessionHeader(b.session_id, "/w", NOW_US)
    return await store.append(header, b.events(), b.expected_last_seq, NOW_US)


async def wave(store: Store, batches: Sequence[Batch]) -> list[AppendResult | BaseException]:
    """The batches appended concurrently: one wave (see the module docstring)."""
    return await asyncio.gather(*(append(store, b) for b in batches), return_exceptions=True)


async def stored_ids(store: Store, session_id: str) -> list[str]:
    """The session's event ids in seq order, after checking seqs are gapless."""
    events = (await store.read(session_id, 0, Direction.FORWARD, 10_000)).events
    assert [e.seq for e in events] == list(range(len(events))), "seqs have a gap"
    return [e.id for e in events]


def ok(seqs: list[int], last_seq: int, duplicate: bool = False) -> AppendResult:
    return AppendResult(seqs, last_seq, duplicate)


async def test_one_wave_answers_each_batch_as_if_it_were_alone(reopen: OpenLog) -> None:
    await reopen()
    store = reopen.store
    a0, b0 = batch("a", "a0", 2), batch("b", "b0", 1)
    for earlier in (a0, b0, batch("shared", "s0", 1)):
        await append(store, earlier)
    a1 = batch("a", "a1", 2, expected=1)
    shared = [batch("shared", f"s{n}", 1 + n % 2) for n in range(1, 7)]
    batches = [
        a1,
        batch("a", "a2", 1, expected=3),  # right only after a1, earlier in the wave
        batch("b", "b1", 1, expected=5),  # wrong: b ends at 0
        batch("b", "b2", 1, expected=0),  # unaffected by b1's refusal
        a0,  # a retry of a batch committed before the wave
        Batch("b", ("b0-0", "b3-0")),  # mixes a used id with a new one
        a1,  # a retry of a batch committed earlier in the same wave
        batch("c", "c0", 3, expected=-1),  # a session's first batch
        batch("c", "c1", 1, expected=-1),  # wrong: c0 came first
        *shared,
    ]
    before = reopen.stats.transactions

    outcomes = await wave(store, batches)

    assert reopen.stats.transactions == before + 1, "the wave was not one transaction"
    assert outcomes[:2] == [ok([2, 3], 3), ok([4], 4)]
    assert isinstance(outcomes[2], WrongExpectedSeq) and outcomes[2].current_last_seq == 0
    assert outcomes[3] == ok([1], 1)
    assert outcomes[4] == ok([0, 1], 4, duplicate=True)
    assert isinstance(outcomes[5], EventIdConflict)
    assert outcomes[6] == ok([2, 3], 4, duplicate=True)
    assert outcomes[7] == ok([0, 1, 2], 2)
    assert isinstance(outcomes[8], WrongExpectedSeq) and outcomes[8].current_last_seq == 2
    shared_seqs = [s for o in outcomes[9:] if isinstance(o, AppendResult) for s in o.seqs]
    assert shared_seqs == list(range(1, 1 + sum(len(b.event_ids) for b in shared)))

    assert await stored_ids(store, "a") == ["a0-0", "a0-1", "a1-0", "a1-1", "a2-0"]
    assert await stored_ids(store, "b") == ["b0-0", "b2-0"]
    assert await stored_ids(store, "c") == ["c0-0", "c0-1", "c0-2"]
    accepted = [i for b, o in zip(batches, outcomes, strict=True) if _wrote(o) for i in b.event_ids]
    assert (await _positions_order(store))[-len(accepted) :] == accepted


def _wrote(outcome: AppendResult | BaseException) -> bool:
    return isinstance(outcome, AppendResult) and not outcome.duplicate


async def _positions_order(store: Store) -> list[str]:
    """Every event id in position order, after checking positions increase and
    each session's seqs follow them."""
    events = await store.read_all(0, 100_000)
    positions = [e.position for e in events]
    assert positions == sorted(set(positions)), "positions are not strictly increasing"
    for session_id in {e.session_id for e in events}:
        seqs = [e.seq for e in events if e.session_id == session_id]
        assert seqs == sorted(seqs), f"{session_id}: seqs out of position order"
    return [e.id for e in events]


async def test_a_batch_the_database_refuses_fails_alone(reopen: OpenLog) -> None:
    """Failures no rule foresees (here a batch repeating an event id, which the
    domain refuses before a store sees it, and an event without a body) fail
    only their own batch, even when the wave's transaction had to go."""
    await reopen()
    store = reopen.store
    await append(store, batch("x", "x0", 1))
    repeated = Batch("new", ("same", "same"))
    good = [batch("x", "x1", 2), batch("new", "n0", 1), batch("y", "y0", 1, expected=-1)]
    outcomes = await asyncio.gather(
        append(store, good[0]),
        append(store, repeated),
        store.append(SessionHeader("x", "/w", NOW_US), [Event(id="bodiless")], None, NOW_US),
        append(store, good[1]),
        append(store, good[2]),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], Exception) and isinstance(outcomes[2], Exception)
    assert [outcomes[0], *outcomes[3:]] == [ok([1, 2], 2), ok([0], 0), ok([0], 0)]
    assert await stored_ids(store, "x") == ["x0-0", "x1-0", "x1-1"]
    assert await stored_ids(store, "new") == ["n0-0"]
    assert await stored_ids(store, "y") == ["y0-0"]
    assert not {"same", "bodiless"} & set(await _positions_order(store))


async def test_concurrent_appends_through_the_log_share_transactions(reopen: OpenLog) -> None:
    log = await reopen()
    appenders = 50
    for n in range(appenders):
        await log.create_session(f"s{n}", "/w")
    transactions, appends = reopen.stats.transactions, reopen.stats.appends
    results = await asyncio.gather(*(log.append(f"s{n}", [user("hi")]) for n in range(appenders)))
    assert [r.seqs for r in results] == [[0]] * appenders
    assert reopen.stats.appends - appends == appenders
    assert reopen.stats.transactions - transactions < appenders, "appends were not grouped"


async def test_many_concurrent_appenders_keep_every_batch_whole(reopen: OpenLog) -> None:
    """32 writers, each on a session of its own and all on a shared one (half
    of them with optimistic concurrency there), with refused and retried
    batches among them: every caller gets what it would have got alone."""
    log = await reopen()
    writers, rounds = 32, 5
    acknowledged: dict[str, list[int]] = {}  # event id -> [seq]
    for name in ["shared", *(f"own{w}" for w in range(writers))]:
        await log.create_session(name, "/w")

    async def writer(w: int) -> None:
        own, last = f"own{w}", -1
        for r in range(rounds):
            mine = batch(own, f"w{w}r{r}", 1 + (w + r) % 3)
            with pytest.raises(WrongExpectedSeq) as refused:
                await log.append(own, mine.events(), expected_last_seq=last + 1)
            assert refused.value.current_last_seq == last
            result = await log.append(own, mine.events(), expected_last_seq=last)
            retried = await log.append(own, mine.events(), expected_last_seq=last)
            assert retried == AppendResult(result.seqs, result.last_seq, duplicate=True)
            _acknowledge(acknowledged, mine, result)
            last = result.last_seq
            theirs = batch("shared", f"w{w}r{r}s", 1 + (w * r) % 3)
            _acknowledge(acknowledged, theirs, await _shared_append(log, theirs, w % 2 == 0))

    await asyncio.gather(*(writer(w) for w in range(writers)))
    store = reopen.store
    for name in ["shared", *(f"own{w}" for w in range(writers))]:
        events = (await store.read(name, 0, Direction.FORWARD, 10_000)).events
        assert [e.seq for e in events] == list(range(len(events))), f"{name}: seqs have a gap"
        assert all(acknowledged.pop(e.id) == [e.seq] for e in events), f"{name}: seq moved"
    assert acknowledged == {}, "acknowledged events are missing"
    await _positions_order(store)


def _acknowledge(acknowledged: dict[str, list[int]], b: Batch, result: AppendResult) -> None:
    assert not result.duplicate and len(result.seqs) == len(b.event_ids)
    assert result.seqs == list(range(result.seqs[0], result.last_seq + 1))
    for event_id, seq in zip(b.event_ids, result.seqs, strict=True):
        assert acknowledged.setdefault(event_id, [seq]) == [seq]


async def _shared_append(log: SessionLog, b: Batch, optimistic: bool) -> AppendResult:
    if not optimistic:
        return await log.append(b.session_id, b.events())
    last = (await log.get_session(b.session_id)).last_seq
    while True:
        try:
            return await log.append(b.session_id, b.events(), expected_last_seq=last)
        except WrongExpectedSeq as refused:
            last = refused.current_last_seq


_EXAMPLES = itertools.count()
_SESSIONS = "pqr"
_BATCHES = st.lists(
    st.tuples(
        st.sampled_from(_SESSIONS),
        st.lists(st.sampled_from([f"e{n}" for n in range(6)]), min_size=1, max_size=3, unique=True),
        st.none() | st.integers(-1, 6),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(drawn=_BATCHES, stored=st.integers(0, 12))
async def test_a_wave_answers_and_writes_what_one_append_at_a_time_would(
    reopen: OpenLog, drawn: list[tuple[str, list[str], int | None]], stored: int
) -> None:
    """The first `stored` batches are appended one at a time in two fresh
    namespaces; the rest then go one at a time in the first and as one wave
    in the second. Both answer and hold the same."""
    store = reopen.store if reopen.opened else await _open(reopen)
    example = next(_EXAMPLES)
    spaces = (f"x{example}-alone-", f"x{example}-wave-")
    alone, grouped = ([Batch(f"{space}{s}", tuple(i), e) for s, i, e in drawn] for space in spaces)
    for b in alone[:stored] + grouped[:stored]:
        await _outcome(store, b)
    one_at_a_time = [await _outcome(store, b) for b in alone[stored:]]
    transactions = store.stats.transactions
    together = await wave(store, grouped[stored:])
    assert store.stats.transactions - transactions == (1 if together else 0)
    assert [_plain(o, spaces[0]) for o in one_at_a_time] == [_plain(o, spaces[1]) for o in together]
    for session in _SESSIONS:
        assert await _ids_or_none(store, spaces[0] + session) == await _ids_or_none(
            store, spaces[1] + session
        )


async def _open(reopen: OpenLog) -> Store:
    await reopen()
    return reopen.store


async def _outcome(store: Store, b: Batch) -> AppendResult | BaseException:
    try:
        return await append(store, b)
    except DomainError as error:
        return error


def _plain(outcome: AppendResult | BaseException, space: str) -> object:
    if isinstance(outcome, DomainError):
        return type(outcome), {k: v.replace(space, "") for k, v in outcome.metadata.items()}
    return outcome


async def _ids_or_none(store: Store, session_id: str) -> list[str] | None:
    if await store.summary(session_id) is None:
        return None
    return await stored_ids(store, session_id)
