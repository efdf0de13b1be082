"""The log tail never answers what the store would not: whatever it is told
of commits (runs of positions, with positions it never saw between them:
another writer's rows, a fork's copies) and clears, its answer for any
position is the store's next events, or None (ask the store). It keeps the
events the log prepared for a commit: each answers as its stored row does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.sessionlog.log_tail import LogTail
from services.sessionlog.store import Event, EventRow, event_from_row, event_row
from tests.support.events import user

# A step: commit `n` events, after `skipped` positions the tail does not see;
# or clear it (n == 0).
steps = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 2)), max_size=20)


def _prepared(position: int) -> Event:
    """An event as the log prepares it for a commit (an id, no seq yet)."""
    event = user(f"at {position}")
    event.id = f"e{position}"
    return event


def _row(position: int) -> EventRow:
    """The row the store writes for `_prepared(position)`: its seq is the
    position here, in a session of its own every third event."""
    return event_row(f"s{position % 3}", position, _prepared(position))


def _commit(tail: LogTail, positions: range) -> list[EventRow]:
    rows = [_row(p) for p in positions]
    tail.committed(rows, [_prepared(p) for p in positions], positions[-1])
    return rows


@settings(deadline=None)  # nothing timed in it; a busy machine is
@given(steps, st.integers(1, 8), st.integers(1, 5))
def test_the_tail_answers_as_the_store_or_not_at_all(
    plan: list[tuple[int, int]], limit: int, page: int
) -> None:
    tail, stored, position = LogTail(limit), [], 0
    for count, skipped in plan:
        if count == 0:
            tail.clear()
            continue
        stored += [_row(p) for p in range(position + 1, position + skipped + 1)]
        position += skipped
        stored += _commit(tail, range(position + 1, position + count + 1))
        position += count
    for after in range(position + 1):
        answer = tail.read(after, page)
        if answer is None:
            continue
        expected = [event_from_row(r[0], r[1], r[1], r[5]) for r in stored if r[1] > after]
        assert answer == expected[:page]


def test_the_tail_holds_the_last_commits_up_to_its_limit() -> None:
    tail = LogTail(limit=4)
    _commit(tail, range(1, 4))
    _commit(tail, range(4, 7))
    assert tail.read(1, 10) is None  # fell out: the store has it
    answer = tail.read(2, 10)
    assert answer is not None and [e.position for e in answer] == [3, 4, 5, 6]
    assert tail.read(6, 10) == []
