"""The log tail never answers what the store would not: whatever it is told
of commits (runs of positions, with positions it never saw between them:
another writer's rows, a fork's copies) and clears, its answer for any
position is the store's next events, or None (ask the store)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.sessionlog.log_tail import LogTail
from services.sessionlog.store import EventRow, event_from_row
from tests.support.events import user

# A step: commit `n` events, after `skipped` positions the tail does not see;
# or clear it (n == 0).
steps = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 2)), max_size=20)


def _row(position: int) -> EventRow:
    body = user(f"at {position}").SerializeToString()
    return (f"s{position % 3}", position, f"e{position}", "user_message", True, body)


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
        rows = [_row(p) for p in range(position + 1, position + count + 1)]
        position += count
        stored += rows
        tail.committed(rows, position)
    for after in range(position + 1):
        answer = tail.read(after, page)
        if answer is None:
            continue
        expected = [event_from_row(r[0], r[1], r[1], r[5]) for r in stored if r[1] > after]
        assert answer == expected[:page]


def test_the_tail_holds_the_last_commits_up_to_its_limit() -> None:
    tail = LogTail(limit=4)
    tail.committed([_row(p) for p in range(1, 4)], 3)
    tail.committed([_row(p) for p in range(4, 7)], 6)
    assert tail.read(1, 10) is None  # fell out: the store has it
    answer = tail.read(2, 10)
    assert answer is not None and [e.position for e in answer] == [3, 4, 5, 6]
    assert tail.read(6, 10) == []
