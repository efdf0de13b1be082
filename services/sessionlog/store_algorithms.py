"""The session stores' reading, paging and fork, written once for every
backend (Temporal's persistence in miniature: shared logic over thin
per-database stores).

Each algorithm is a generator that yields the `Ask`s it needs answered and
is sent back each answer, already mapped to domain values; it never touches
a connection. A backend answers the asks with its own SQL and row mapping
(`sqlite_store.py` runs an algorithm inside one read or write unit on its
thread, `postgres_store.py` with async psycopg) through `run` or `run_async`.

The asks, and what each is answered with:
- `LastSeq(session_id)`: the session's last seq, or None when it is unknown;
- `Summary(session_id)`: its summary, or None;
- `EventsFrom(session_id, from_seq, limit)`: events with seq >= from_seq, ascending;
- `EventsBack(session_id, up_to_seq, limit)`: events with seq <= up_to_seq, descending;
- `EventsThrough(session_id, last_seq)`: events with seq <= last_seq, ascending;
- `EventsBetween(session_id, start, end)`: events with start <= seq < end, ascending;
- `MessagesBack(session_id, end, offset)`: the seqs of the messages `offset`
  and `offset + 1` places before `end` (0: the last one before it), newest
  first, those there are (none, one or both);
- `AddSession(row)`, `AddEvents(rows)`, `Touch(row)`: writes, answered None;
- `Forked(session_id)`: a fork's events are written (a backend that wakes
  subscribers of other replicas does it here), answered None;
- `CopyImages(source_id, target_id)`: the fork holds the images its source
  holds, answered None.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from services.common.errors import SessionNotFound

from .port import Direction, ReadResult, TailPage
from .store import (
    Event,
    EventRow,
    SessionHeader,
    SessionRow,
    SessionSummary,
    TouchRow,
    event_row,
    session_row,
    touch_row,
)

T = TypeVar("T")


@dataclass(frozen=True)
class LastSeq:
    session_id: str


@dataclass(frozen=True)
class Summary:
    session_id: str


@dataclass(frozen=True)
class EventsFrom:
    session_id: str
    from_seq: int
    limit: int


@dataclass(frozen=True)
class EventsBack:
    session_id: str
    up_to_seq: int
    limit: int


@dataclass(frozen=True)
class EventsThrough:
    session_id: str
    last_seq: int


@dataclass(frozen=True)
class EventsBetween:
    session_id: str
    start: int
    end: int


@dataclass(frozen=True)
class MessagesBack:
    session_id: str
    end: int
    offset: int


@dataclass(frozen=True)
class AddSession:
    row: SessionRow


@dataclass(frozen=True)
class AddEvents:
    rows: Sequence[EventRow]


@dataclass(frozen=True)
class Touch:
    row: TouchRow


@dataclass(frozen=True)
class Forked:
    session_id: str


@dataclass(frozen=True)
class CopyImages:
    """The fork `target_id` holds the images `source_id` holds."""

    source_id: str
    target_id: str


Ask = (
    LastSeq
    | Summary
    | EventsFrom
    | EventsBack
    | EventsThrough
    | EventsBetween
    | MessagesBack
    | AddSession
    | AddEvents
    | Touch
    | Forked
    | CopyImages
)
Algorithm = Generator[Ask, Any, T]


# -- the algorithms ----------------------------------------------------------------------


def read(
    session_id: str, from_seq: int | None, direction: Direction, limit: int
) -> Algorithm[ReadResult]:
    last_seq = yield LastSeq(session_id)
    if last_seq is None:
        raise SessionNotFound(session_id)
    events: list[Event]
    if direction is Direction.FORWARD:
        if (from_seq or 0) > last_seq:
            # Nothing after the log's end: most catch-ups find nothing, and
            # where the store is across a network this asks it once, not twice.
            return ReadResult([], last_seq)
        events = yield EventsFrom(session_id, from_seq or 0, limit)
    else:
        start = last_seq if from_seq is None else from_seq
        events = yield EventsBack(session_id, start, limit)
    return ReadResult(events, last_seq)


def tail_page(session_id: str, before_seq: int | None, message_limit: int) -> Algorithm[TailPage]:
    """The page of the last `message_limit` messages before `before_seq`."""
    # The session's row gives last_seq and the summary in one read, so both
    # describe the same position.
    summary: SessionSummary | None = yield Summary(session_id)
    if summary is None:
        raise SessionNotFound(session_id)
    last_seq = summary.last_seq
    end = last_seq + 1 if before_seq is None else min(before_seq, last_seq + 1)
    start = yield from page_start(session_id, end, message_limit)
    events = yield EventsBetween(session_id, start, end)
    return TailPage(events, start > 0, start, last_seq, summary)


def page_start(session_id: str, end: int, message_limit: int) -> Algorithm[int]:
    """First seq of the page ending before `end`: the oldest of its
    `message_limit` messages, or 0 when no older message exists."""
    # The page's oldest message and the one before it, in one ask: without
    # an older message the page starts at the log's start.
    seqs: list[int] = yield MessagesBack(session_id, end, message_limit - 1)
    return seqs[0] if len(seqs) == 2 else 0


def fork(
    source_id: str, up_to_seq: int | None, header: SessionHeader, now_us: int
) -> Algorithm[SessionSummary]:
    """A new session holding the source's events up to `up_to_seq`, under
    the same seqs (in the backend's write transaction)."""
    source_last = yield LastSeq(source_id)
    if source_last is None:
        raise SessionNotFound(source_id)
    last = source_last if up_to_seq is None else min(up_to_seq, source_last)
    yield AddSession(session_row(replace(header, forked_from=source_id), now_us))
    events: list[Event] = yield EventsThrough(source_id, last)
    if events:
        yield AddEvents(_copies(header.id, events))
        yield Touch(touch_row(header.id, events, events[-1].seq, now_us))
        yield Forked(header.id)
    yield CopyImages(source_id, header.id)
    summary: SessionSummary | None = yield Summary(header.id)
    assert summary is not None, "the fork was just written"
    return summary


def _copies(session_id: str, events: Sequence[Event]) -> list[EventRow]:
    """A fork's rows: the source's events under the same seqs, from 0."""
    return [event_row(session_id, seq, e) for seq, e in enumerate(events)]


# -- running them ---------------------------------------------------------------------


def run(algorithm: Algorithm[T], answer: Callable[[Ask], Any]) -> T:
    """Run `algorithm`, answering each ask with `answer` (synchronous)."""
    try:
        ask = next(algorithm)
        while True:
            ask = algorithm.send(answer(ask))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def run_async(algorithm: Algorithm[T], answer: Callable[[Ask], Awaitable[Any]]) -> T:
    """Run `algorithm`, answering each ask with the awaited `answer`."""
    try:
        ask = next(algorithm)
        while True:
            ask = algorithm.send(await answer(ask))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
