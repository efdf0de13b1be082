"""One session's event history as a client holds it (pure, no I/O).

A contiguous window of the log, `first .. last_seq`, each event exactly once.
Events arrive from the tail page of an open, from the live stream, from the
catch-up after a reconnect and from gap repair, in any order and possibly
twice: duplicates are dropped, events beyond a gap wait until the gap is
filled (`missing()` says which seqs to fetch), and malformed events never
enter.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agenthost.sessionlog.v1 import events_pb2

Event = events_pb2.Event


def well_formed(event: Event, session_id: str) -> bool:
    """An event this session can hold: a body, a seq, and no other session's."""
    return (
        event.seq >= 0
        and event.WhichOneof("body") is not None
        and event.session_id in ("", session_id)
    )


class HistoryGap(Exception):
    """An older page that does not end right before the window."""

    def __init__(self, base: int, first: int, last: int) -> None:
        super().__init__(f"a page of seqs {first}..{last} does not end right before seq {base}")
        self.base, self.first, self.last = base, first, last


@dataclass(frozen=True)
class Gap:
    """Seqs `after < seq < before` are missing."""

    after: int
    before: int


class History:
    """A contiguous window of one session's log; see the module docstring."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.events: list[Event] = []
        # Whether older events exist before the window, and the `before_seq`
        # that fetches the next older page.
        self.has_more = False
        self.before_seq = 0
        # The last seq of the contiguous window (-1: none yet).
        self.last_seq = -1
        # Whether a base (a tail page) was applied; until then nothing is
        # contiguous and every event waits.
        self.based = False
        self._ahead: dict[int, Event] = {}

    @property
    def seqs(self) -> list[int]:
        """The seqs of the window, oldest first."""
        return [event.seq for event in self.events]

    def replace(
        self, events: Iterable[Event], *, has_more: bool, before_seq: int, last_seq: int
    ) -> list[Event]:
        """A new window (an open, or a reopen after a resync): the tail page
        up to the log's `last_seq`. Returns the events newly in the window."""
        page = [e for e in events if well_formed(e, self.session_id)]
        page.sort(key=lambda e: e.seq)
        # Events that came live while the page was read stay usable.
        waiting = dict(self._ahead)
        self.events = []
        self._ahead = {}
        self.has_more, self.before_seq = has_more, before_seq
        self.based = True
        if page:
            self.last_seq = page[0].seq - 1
            return self.ingest([*page, *waiting.values()])
        self.last_seq = last_seq
        return self.ingest(waiting.values())

    def ingest(self, events: Iterable[Event]) -> list[Event]:
        """Events received in any order; returns those appended to the
        window, in seq order (each at most once over the history's life)."""
        for event in events:
            if not well_formed(event, self.session_id):
                continue
            if event.seq <= self.last_seq and self.based:
                continue
            self._ahead.setdefault(event.seq, event)
        if not self.based:
            return []
        appended: list[Event] = []
        for seq in sorted(s for s in self._ahead if s <= self.last_seq):
            del self._ahead[seq]
        while self.last_seq + 1 in self._ahead:
            event = self._ahead.pop(self.last_seq + 1)
            self.events.append(event)
            self.last_seq = event.seq
            appended.append(event)
        return appended

    @property
    def base(self) -> int:
        """The first seq of the window (last_seq + 1 when it is empty)."""
        return self.events[0].seq if self.events else self.last_seq + 1

    def prepend(self, events: Iterable[Event], *, has_more: bool, before_seq: int) -> list[Event]:
        """An older page: what it holds from the window's base on is already
        here; the rest is accepted only when it is contiguous and its last
        seq + 1 is the base. Returns what was added; raises HistoryGap (and
        changes nothing) otherwise."""
        base = self.base
        older = {e.seq: e for e in events if well_formed(e, self.session_id) and e.seq < base}
        page = [older[seq] for seq in sorted(older)]
        if not page:
            self.has_more, self.before_seq = has_more, before_seq
            return []
        seqs = [e.seq for e in page]
        if seqs[-1] + 1 != base or seqs != list(range(seqs[0], seqs[-1] + 1)):
            raise HistoryGap(base, seqs[0], seqs[-1])
        self.events[:0] = page
        self.has_more, self.before_seq = has_more, before_seq
        return page

    def missing(self) -> Gap | None:
        """The first gap between the window and events waiting beyond it."""
        if not self.based or not self._ahead:
            return None
        return Gap(self.last_seq, min(self._ahead))

    @property
    def waiting(self) -> int:
        """Events held beyond a gap."""
        return len(self._ahead)
