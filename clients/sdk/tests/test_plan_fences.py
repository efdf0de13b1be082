"""The plan fences, fed replies, projection values and reconnects in adversarial orders."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clients.sdk.plan import (
    UNAVAILABLE,
    PlanState,
    PlanTicket,
    PlanTracker,
    PlanValue,
    RequestKind,
    SessionPlan,
    Verdict,
)

QUERY, SELECT, OPEN = RequestKind.QUERY, RequestKind.SELECT, RequestKind.OPEN


def value(active: bool, pending: bool | None = None) -> PlanValue:
    return PlanValue(PlanState(active, pending))


def confirmed(active: bool = False, seq: int = 0) -> PlanTracker:
    """A tracker whose first query confirmed plan mode."""
    tracker = PlanTracker()
    tracker.on_reply(tracker.begin(QUERY), value(active), seq)
    return tracker


def state(tracker: PlanTracker) -> PlanState | None:
    return tracker.view.state


# -- the state value -----------------------------------------------------------------


def test_pending_equal_to_active_is_not_a_state() -> None:
    with pytest.raises(ValueError):
        PlanState(True, True)
    assert PlanState(False, True).describe() == "off → on (pending)"
    assert PlanState(True, False).describe() == "on → off (pending)"
    assert PlanState(True).describe() == "on"
    assert SessionPlan(None, None).describe() == "unknown"
    assert SessionPlan(False, None).describe() == "unavailable"


# -- request fence: one monotonic number for queries and selections --------------------


def test_an_older_query_reply_arriving_after_a_newer_selection_is_dropped() -> None:
    tracker = confirmed()
    query = tracker.begin(QUERY)
    selection = tracker.begin(SELECT)
    assert tracker.on_reply(selection, value(False, True), 4).verdict is Verdict.APPLIED
    late = tracker.on_reply(query, value(False), 4)
    assert late.verdict is Verdict.OLDER_REQUEST and not late.changed
    assert state(tracker) == PlanState(False, True)


def test_overlapping_selections_keep_the_newest_whatever_the_reply_order() -> None:
    tracker = confirmed()
    first, second = tracker.begin(SELECT), tracker.begin(SELECT)
    tracker.on_reply(second, value(False), 5)  # on then off again: cancelled
    assert tracker.on_reply(first, value(False, True), 5).verdict is Verdict.OLDER_REQUEST
    assert state(tracker) == PlanState(False)


def test_replies_in_order_are_all_applied() -> None:
    tracker = confirmed()
    first, second = tracker.begin(QUERY), tracker.begin(SELECT)
    assert tracker.on_reply(first, value(False), 3).verdict is Verdict.APPLIED
    assert tracker.on_reply(second, value(False, True), 3).verdict is Verdict.APPLIED
    assert state(tracker) == PlanState(False, True)


# -- generation fence ---------------------------------------------------------------------


def test_a_query_begun_before_a_reconnect_is_dropped_after_it() -> None:
    tracker = confirmed(active=True, seq=2)
    before = tracker.begin(QUERY)
    tracker.reconnected(1)
    decision = tracker.on_reply(before, value(False), 9)
    assert decision.verdict is Verdict.SUPERSEDED
    assert state(tracker) == PlanState(True)
    after = tracker.begin(QUERY)
    assert after.generation == 1
    assert tracker.on_reply(after, value(False), 9).verdict is Verdict.APPLIED


def test_an_open_superseded_by_a_reconnect_is_dropped_even_when_it_is_newest() -> None:
    tracker = PlanTracker()
    opened = tracker.begin(OPEN)
    tracker.reconnected(3)
    assert tracker.on_reply(opened, value(True), 4).verdict is Verdict.SUPERSEDED
    assert tracker.view == SessionPlan(None, None)


def test_a_failure_of_a_superseded_request_is_not_reported_as_a_failure() -> None:
    tracker = confirmed()
    ticket = tracker.begin(QUERY)
    tracker.reconnected(1)
    assert tracker.on_failure(ticket).verdict is Verdict.SUPERSEDED


# -- seq fence: the higher seq wins between replies and projection values ---------------


def test_a_projection_value_overtaking_a_query_reply_wins() -> None:
    tracker = confirmed(active=False, seq=3)
    query = tracker.begin(QUERY)
    assert tracker.on_projection(value(True), 6).verdict is Verdict.VALUE_APPLIED
    late = tracker.on_reply(query, value(False), 5)  # computed before the commit
    assert late.verdict is Verdict.NEWER_KNOWN
    assert state(tracker) == PlanState(True)


def test_a_reply_as_new_as_the_value_carries_the_same_state() -> None:
    tracker = confirmed()
    tracker.on_projection(value(True), 6)
    selection = tracker.begin(SELECT)
    assert tracker.on_reply(selection, value(True, False), 7).verdict is Verdict.APPLIED
    assert state(tracker) == PlanState(True, False)


def test_a_commit_value_clears_a_pending_choice() -> None:
    tracker = confirmed()
    tracker.on_reply(tracker.begin(SELECT), value(False, True), 4)
    tracker.on_projection(value(True), 6)
    assert state(tracker) == PlanState(True)


def test_an_older_projection_value_changes_nothing() -> None:
    tracker = confirmed()
    tracker.on_reply(tracker.begin(SELECT), value(True, False), 8)
    assert tracker.on_projection(value(True), 7).verdict is Verdict.VALUE_OLD
    assert state(tracker) == PlanState(True, False)


def test_a_block_without_plan_says_unavailable_and_a_plan_value_says_available() -> None:
    tracker = PlanTracker()
    tracker.on_projection(UNAVAILABLE, 3)
    assert tracker.view == SessionPlan(False, None)
    assert tracker.view.describe() == "unavailable"
    other = PlanTracker()
    other.on_projection(value(False, True), 3)
    assert other.view == SessionPlan(True, PlanState(False, True))


def test_a_replaced_history_lets_a_lower_seq_count() -> None:
    tracker = confirmed(active=True, seq=9)
    tracker.reset()
    assert tracker.on_projection(value(False), 2).verdict is Verdict.VALUE_APPLIED
    assert state(tracker) == PlanState(False)


# -- failures ---------------------------------------------------------------------------------


def test_a_failed_query_keeps_the_last_known_state() -> None:
    tracker = confirmed(active=True, seq=4)
    failed = tracker.on_failure(tracker.begin(QUERY))
    assert failed.verdict is Verdict.FAILED and not failed.changed
    assert state(tracker) == PlanState(True)


def test_a_failed_selection_leaves_the_state_and_later_replies_still_apply() -> None:
    tracker = confirmed()
    tracker.on_failure(tracker.begin(SELECT))
    assert state(tracker) == PlanState(False)
    assert tracker.on_reply(tracker.begin(QUERY), value(True), 5).verdict is Verdict.APPLIED


def test_the_latest_selection_failing_is_kept_until_a_newer_one_begins() -> None:
    tracker = confirmed()
    failed = tracker.begin(SELECT)
    tracker.on_failure(failed)
    assert tracker.selection_failed == failed
    tracker.on_reply(tracker.begin(QUERY), value(False), 5)  # a query changes nothing
    assert tracker.selection_failed == failed
    tracker.begin(SELECT)
    assert tracker.selection_failed is None


def test_an_older_superseded_selection_failing_blocks_nothing() -> None:
    tracker = confirmed()
    older, newer = tracker.begin(SELECT), tracker.begin(SELECT)
    tracker.on_failure(older)
    assert tracker.selection_failed is None
    tracker.on_reply(newer, value(True), 6)
    assert tracker.selection_failed is None


# -- any order: a model of the server and a shuffled delivery --------------------------


@dataclass
class Reply:
    ticket: PlanTicket
    value: PlanValue
    seq: int


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[PlanTracker, list[object], PlanState]:
    """The server runs a sequence of operations (commits and selections, each
    a new log seq with its projection value, and queries); the client
    receives every reply and every value, in a shuffled order. Returns what
    the client must end with: the state at the highest seq."""
    tracker = PlanTracker()
    active, pending, seq = False, None, 0
    deliveries: list[object] = [Value(value(active), seq)]
    for op in draw(st.lists(st.sampled_from(["commit", "select", "query"]), max_size=12)):
        ticket = tracker.begin(QUERY if op == "query" else SELECT)
        if op == "commit":
            active, pending = (pending if pending is not None else not active), None
        elif op == "select":
            target = draw(st.booleans())
            pending = None if target == active else target
        if op != "query":
            seq += 1
            deliveries.append(Value(value(active, pending), seq))
        deliveries.append(Reply(ticket, value(active, pending), seq))
    order = draw(st.permutations(deliveries))
    return tracker, list(order), PlanState(active, pending)


@dataclass
class Value:
    value: PlanValue
    seq: int


@settings(max_examples=300)
@given(scenarios())
def test_any_delivery_order_ends_at_the_state_of_the_highest_seq(
    scenario: tuple[PlanTracker, list[object], PlanState],
) -> None:
    tracker, order, expected = scenario
    for item in order:
        if isinstance(item, Reply):
            tracker.on_reply(item.ticket, item.value, item.seq)
        else:
            assert isinstance(item, Value)
            tracker.on_projection(item.value, item.seq)
    assert tracker.view.available is True
    assert tracker.view.state == expected


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 30), st.booleans()), max_size=20), st.randoms())
def test_values_in_any_order_end_at_the_latest(
    values: list[tuple[int, bool]], rng: random.Random
) -> None:
    tracker = confirmed(seq=-1)
    shuffled = list(values)
    rng.shuffle(shuffled)
    for seq, active in shuffled:
        tracker.on_projection(value(active), seq)
    if values:
        latest = max(seq for seq, _ in values)
        actives = {active for seq, active in values if seq == latest}
        assert tracker.view.state is not None
        assert tracker.view.state.active in actives
    else:
        assert tracker.view.state == PlanState(False)
