"""The history window: each event once, in order, whatever the arrival order."""

from __future__ import annotations

import random

import pytest
from agenthost.sessionlog.v1 import events_pb2
from hypothesis import given
from hypothesis import strategies as st

from clients.sdk.history import Gap, History, HistoryGap

SESSION = "s-1"


def ev(seq: int, text: str = "") -> events_pb2.Event:
    return events_pb2.Event(
        seq=seq,
        session_id=SESSION,
        assistant_message=events_pb2.AssistantMessage(text=text or f"m{seq}"),
    )


def seqs(events: list[events_pb2.Event]) -> list[int]:
    return [e.seq for e in events]


def test_nothing_is_contiguous_before_a_base_page() -> None:
    history = History(SESSION)
    assert history.ingest([ev(7), ev(8)]) == []
    assert history.missing() is None
    appended = history.replace([ev(4), ev(5), ev(6)], has_more=True, before_seq=4, last_seq=6)
    assert seqs(appended) == [4, 5, 6, 7, 8]
    assert history.seqs == [4, 5, 6, 7, 8] and history.last_seq == 8


def test_duplicates_are_dropped_and_a_gap_is_reported_until_filled() -> None:
    history = History(SESSION)
    history.replace([ev(0), ev(1)], has_more=False, before_seq=0, last_seq=1)
    assert history.ingest([ev(1), ev(4), ev(4)]) == []
    assert history.missing() == Gap(after=1, before=4)
    assert seqs(history.ingest([ev(2), ev(3), ev(4)])) == [2, 3, 4]
    assert history.missing() is None
    assert history.seqs == [0, 1, 2, 3, 4]


def test_an_empty_log_is_a_base_at_minus_one() -> None:
    history = History(SESSION)
    history.replace([], has_more=False, before_seq=0, last_seq=-1)
    assert seqs(history.ingest([ev(0)])) == [0]


def test_malformed_events_never_enter() -> None:
    history = History(SESSION)
    history.replace([], has_more=False, before_seq=0, last_seq=-1)
    bodiless = events_pb2.Event(seq=0, session_id=SESSION)
    elsewhere = events_pb2.Event(
        seq=0, session_id="other", assistant_message=events_pb2.AssistantMessage(text="x")
    )
    negative = ev(-3)
    assert history.ingest([bodiless, elsewhere, negative]) == []
    assert history.seqs == [] and history.missing() is None


def test_older_pages_are_prepended_without_overlap() -> None:
    history = History(SESSION)
    history.replace([ev(5), ev(6)], has_more=True, before_seq=5, last_seq=6)
    added = history.prepend([ev(2), ev(3), ev(4), ev(5)], has_more=True, before_seq=2)
    assert seqs(added) == [2, 3, 4]
    assert history.seqs == [2, 3, 4, 5, 6] and history.before_seq == 2


def test_an_older_page_with_a_gap_is_refused_and_loading_goes_on() -> None:
    history = History(SESSION)
    history.replace([ev(5), ev(6)], has_more=True, before_seq=5, last_seq=6)
    with pytest.raises(HistoryGap):
        history.prepend([ev(1), ev(2), ev(3)], has_more=True, before_seq=1)
    assert history.seqs == [5, 6] and (history.has_more, history.before_seq) == (True, 5)
    with pytest.raises(HistoryGap):
        history.prepend([ev(2), ev(4)], has_more=True, before_seq=2)
    assert seqs(history.prepend([ev(3), ev(4)], has_more=False, before_seq=3)) == [3, 4]
    assert history.seqs == [3, 4, 5, 6] and history.has_more is False


def test_a_replacement_keeps_live_events_that_came_meanwhile() -> None:
    history = History(SESSION)
    history.replace([ev(0), ev(1)], has_more=False, before_seq=0, last_seq=1)
    history.ingest([ev(9)])  # far beyond: waits
    history.replace([ev(7), ev(8)], has_more=True, before_seq=7, last_seq=8)
    assert history.seqs == [7, 8, 9]


@given(
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=0, max_value=40),
    st.randoms(),
)
def test_any_arrival_order_with_duplicates_gives_each_event_once(
    last: int, base_from: int, rng: random.Random
) -> None:
    base_from = min(base_from, last)
    history = History(SESSION)
    stream = [ev(seq) for seq in range(last + 1)]
    stream += rng.sample(stream, k=min(len(stream), 5))  # duplicates
    rng.shuffle(stream)
    cut = rng.randint(0, len(stream))
    appended = list(history.ingest(stream[:cut]))
    page = [ev(seq) for seq in range(base_from, rng.randint(base_from, last) + 1)]
    appended += history.replace(
        page, has_more=base_from > 0, before_seq=base_from, last_seq=page[-1].seq
    )
    appended += history.ingest(stream[cut:])
    # Repair: whatever is missing arrives again from the log.
    while (gap := history.missing()) is not None:
        appended += history.ingest([ev(s) for s in range(gap.after + 1, gap.before)])
    assert history.seqs == list(range(base_from, last + 1))
    assert seqs(appended) == history.seqs
