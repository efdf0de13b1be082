"""The stores' shared reading: what each read asks of its backend, which on
PostgreSQL is a round trip apiece."""

from __future__ import annotations

from typing import Any

from services.sessionlog import store_algorithms as algorithms
from services.sessionlog.port import Direction, ReadResult
from tests.support.events import user

LAST_SEQ = 9
STORED = [user(f"message {seq}") for seq in range(LAST_SEQ + 1)]


def _read(from_seq: int | None) -> tuple[ReadResult, list[type]]:
    """A forward read of a session whose log ends at LAST_SEQ, and the kinds
    of what it asked."""
    asked: list[type] = []

    def answer(ask: algorithms.Ask) -> Any:
        asked.append(type(ask))
        if isinstance(ask, algorithms.LastSeq):
            return LAST_SEQ
        assert isinstance(ask, algorithms.EventsFrom)
        return STORED[ask.from_seq : ask.from_seq + ask.limit]

    read = algorithms.read("s", from_seq, Direction.FORWARD, 100)
    return algorithms.run(read, answer), asked


def test_a_catch_up_past_the_end_asks_for_the_last_seq_only() -> None:
    result, asked = _read(LAST_SEQ + 1)
    assert result == ReadResult([], LAST_SEQ)
    assert asked == [algorithms.LastSeq]


def test_a_read_up_to_the_end_asks_for_the_events() -> None:
    result, asked = _read(LAST_SEQ)
    assert result == ReadResult(STORED[LAST_SEQ:], LAST_SEQ)
    assert asked == [algorithms.LastSeq, algorithms.EventsFrom]
    assert _read(None)[0] == ReadResult(STORED, LAST_SEQ)
