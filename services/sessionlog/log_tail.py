"""The events a store committed last, by position, for the all-sessions
followers (the projection service, the gateway's hub) to read without a
trip to the store.

Each committed append wakes every follower, and each read what it missed
from the store: a hand-off to the reader thread, a query, and every event
decoded again, per follower. A store whose positions only its own process
assigns, in commit order (SQLite: one writer), knows those events as it
commits them: it keeps the very events the log prepared for the commit
(nothing is decoded again) and the followers' reads after `base` are
answered from memory.

The tail answers only while it holds every position after `base`: a change
of the events other than an append (a fork's copies, a deletion) clears it,
and an append whose first position does not follow its last starts it
afresh. A read before `base` goes to the store.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import islice

from .store import Event, EventRow

# Events kept: a follower that fell further behind reads from the store.
TAIL_EVENTS = 4096


class LogTail:
    def __init__(self, limit: int = TAIL_EVENTS) -> None:
        self._events: deque[Event] = deque()
        self._limit = limit
        # Every position after this one is held (None: nothing is held).
        self._base: int | None = None

    def committed(
        self, rows: Sequence[EventRow], events: Sequence[Event], last_position: int
    ) -> None:
        """Rows just committed, in insertion order, the last at `last_position`
        (their positions follow one another: one writer, one transaction), and
        the event each stores. The tail keeps those events, given their row's
        session, seq and position, as a read from the store would answer them:
        an append hands its events over to the store (SessionStore.append)."""
        if not rows:
            return
        first = last_position - len(rows) + 1
        if self._base is None or first != self._base + len(self._events) + 1:
            self._events.clear()
            self._base = first - 1
        for offset, (row, event) in enumerate(zip(rows, events, strict=True)):
            event.session_id, event.seq, event.position = row[0], row[1], first + offset
            self._events.append(event)
        excess = len(self._events) - self._limit
        for _ in range(max(excess, 0)):
            self._events.popleft()
        self._base += max(excess, 0)

    def clear(self) -> None:
        self._events.clear()
        self._base = None

    def read(self, after_position: int, limit: int) -> list[Event] | None:
        """Up to `limit` events after `after_position`, shared (read them,
        do not change them); None when the tail cannot tell."""
        if self._base is None or after_position < self._base:
            return None
        start = after_position - self._base
        if start >= len(self._events):
            return []  # nothing after it yet
        return list(islice(self._events, start, start + min(limit, len(self._events))))
