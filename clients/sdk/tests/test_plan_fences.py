"""The plan fences, fed replies, events and reconnects in adversarial orders."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from agenthost.sessionlog.v1 import events_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from clients.sdk.plan import (
    UNAVAILABLE,
    PlanState,
    PlanTicket,
    PlanTracker,
    PlanValue,
    PlanView,
    RequestKind,
    Verdict,
)

QUERY, SELECT, OPEN = RequestKind.QUERY, RequestKind.SELECT, RequestKind.OPEN


def value(active: bool, pending: bool | None = None) -> PlanValue:
    return PlanValue(PlanState(active, pending))


def commit(seq: int, active: bool) -> events_pb2.Event:
    return events_pb2.Event(seq=seq, plan_mode=events_pb2.PlanMode(active=active))


def message(seq: int) -> events_pb2.Event:
    return events_pb2.Event(seq=seq, assistant_message=events_pb2.AssistantMessage(text="hi"))


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
    assert PlanView(None, None).describe() == "unknown"
    assert PlanView(False, None).describe() == "unavailable"


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
    assert tracker.view == PlanView(None, None)


def test_a_failure_of_a_superseded_request_is_not_reported_as_a_failure() -> None:
    tracker = confirmed()
    ticket = tracker.begin(QUERY)
    tracker.reconnected(1)
    assert tracker.on_failure(ticket).verdict is Verdict.SUPERSEDED


# -- event-version fence --------------------------------------------------------------------


def test_a_commit_on_the_stream_overtaking_a_query_reply_wins() -> None:
    tracker = confirmed(active=False, seq=3)
    query = tracker.begin(QUERY)
    applied = tracker.on_events([commit(6, True)])
    assert applied is not None and applied.verdict is Verdict.COMMIT_APPLIED
    late = tracker.on_reply(query, value(False), 5)  # computed before the commit
    assert late.verdict is Verdict.COMMIT_WINS
    assert state(tracker) == PlanState(True)


def test_a_reply_as_new_as_the_commit_carries_a_later_pending_choice() -> None:
    tracker = confirmed()
    tracker.on_events([commit(6, True)])
    selection = tracker.begin(SELECT)
    assert tracker.on_reply(selection, value(True, False), 6).verdict is Verdict.APPLIED
    assert state(tracker) == PlanState(True, False)


def test_a_commit_clears_a_pending_choice() -> None:
    tracker = confirmed()
    tracker.on_reply(tracker.begin(SELECT), value(False, True), 4)
    tracker.on_events([message(5), commit(6, True)])
    assert state(tracker) == PlanState(True)


def test_a_selection_reply_overtaken_by_its_own_commit_keeps_the_commit() -> None:
    tracker = confirmed()
    selection = tracker.begin(SELECT)
    tracker.on_events([commit(7, True)])  # the boundary applied it
    assert tracker.on_reply(selection, value(False, True), 5).verdict is Verdict.COMMIT_WINS
    assert state(tracker) == PlanState(True)


# -- events before the feature is confirmed ----------------------------------------------------


def test_events_change_nothing_until_a_query_confirms_plan_mode() -> None:
    tracker = PlanTracker()
    held = tracker.on_events([commit(2, True)])
    assert held is not None and held.verdict is Verdict.COMMIT_HELD
    assert tracker.view == PlanView(None, None)
    # The reply is older than the held commit: it confirms plan mode, the commit shows.
    decision = tracker.on_reply(tracker.begin(QUERY), value(False), 1)
    assert decision.verdict is Verdict.COMMIT_WINS
    assert tracker.view == PlanView(True, PlanState(True))


def test_a_held_commit_older_than_the_confirming_reply_gives_way() -> None:
    tracker = PlanTracker()
    tracker.on_events([commit(2, True)])
    tracker.on_reply(tracker.begin(QUERY), value(True, False), 4)
    assert state(tracker) == PlanState(True, False)


def test_without_plan_mode_events_never_make_it_available() -> None:
    tracker = PlanTracker()
    tracker.on_reply(tracker.begin(QUERY), UNAVAILABLE, -1)
    decision = tracker.on_events([commit(3, True)])
    assert decision is not None and decision.verdict is Verdict.COMMIT_HELD
    assert tracker.view == PlanView(False, None)
    assert tracker.view.describe() == "unavailable"


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


# -- malformed events and gap repair ---------------------------------------------------------------


def test_a_malformed_plan_event_is_ignored() -> None:
    tracker = confirmed()
    broken = events_pb2.Event(seq=-4, plan_mode=events_pb2.PlanMode(active=True))
    decision = tracker.on_events([broken])
    assert decision is not None and decision.verdict is Verdict.MALFORMED
    assert state(tracker) == PlanState(False)
    assert tracker.on_events([message(3)]) is None


def test_the_latest_commit_of_a_batch_counts_whatever_its_order() -> None:
    tracker = confirmed()
    tracker.on_events([commit(9, True), commit(7, False), message(8)])
    assert state(tracker) == PlanState(True)
    assert tracker.commit is not None and tracker.commit.seq == 9


def test_gap_repair_applies_a_recovered_commit() -> None:
    tracker = confirmed(active=False, seq=4)
    # Events 5..8 were missed; the repaired window overlaps the frame that
    # revealed the gap (seq 8) and holds the commit at 6.
    tracker.on_events([message(8)])
    decision = tracker.on_events([message(5), commit(6, True), message(7), message(8)])
    assert decision is not None and decision.verdict is Verdict.COMMIT_APPLIED
    assert state(tracker) == PlanState(True)


def test_a_recovered_commit_older_than_the_state_changes_nothing() -> None:
    tracker = confirmed()
    tracker.on_reply(tracker.begin(SELECT), value(True, False), 8)
    decision = tracker.on_events([commit(7, True)])
    assert decision is not None and decision.verdict is Verdict.COMMIT_OLD
    assert state(tracker) == PlanState(True, False)


def test_a_replayed_history_window_does_not_undo_a_newer_commit() -> None:
    tracker = confirmed()
    tracker.on_events([commit(5, True)])
    tracker.on_events([commit(3, False), message(4), commit(5, True)])
    assert state(tracker) == PlanState(True)


# -- any order: a model of the server and a shuffled delivery --------------------------


@dataclass
class Reply:
    ticket: PlanTicket
    value: PlanValue
    seq: int


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[PlanTracker, list[object], Reply, int, bool]:
    """The server runs a sequence of operations (commits, selections while
    running, queries); the client receives every reply and every commit, in
    a shuffled order. Returns what the client must end with."""
    tracker = PlanTracker()
    active, pending, seq = False, None, 0
    deliveries: list[object] = []
    replies: list[Reply] = []
    last_commit = (-1, False)
    for op in draw(st.lists(st.sampled_from(["commit", "select", "query"]), max_size=12)):
        if op == "commit":
            seq += 1
            active, pending = (pending if pending is not None else not active), None
            deliveries.append(commit(seq, active))
            last_commit = (seq, active)
            continue
        ticket = tracker.begin(QUERY if op == "query" else SELECT)
        if op == "select":
            target = draw(st.booleans())
            pending = None if target == active else target
        reply = Reply(ticket, value(active, pending), seq)
        replies.append(reply)
        deliveries.append(reply)
    if not replies or draw(st.booleans()):
        # A last query (plan mode must be confirmed by some reply).
        final = Reply(tracker.begin(QUERY), value(active, pending), seq)
        replies.append(final)
        deliveries.append(final)
    order = draw(st.permutations(deliveries))
    newest = replies[-1]
    commit_seq, commit_active = last_commit
    return tracker, list(order), newest, commit_seq, commit_active


@settings(max_examples=300)
@given(scenarios())
def test_any_delivery_order_ends_at_the_newest_reply_or_a_newer_commit(
    scenario: tuple[PlanTracker, list[object], Reply, int, bool],
) -> None:
    tracker, order, newest, commit_seq, commit_active = scenario
    for item in order:
        if isinstance(item, Reply):
            tracker.on_reply(item.ticket, item.value, item.seq)
        else:
            assert isinstance(item, events_pb2.Event)
            tracker.on_events([item])
    expected = newest.value.state if newest.seq >= commit_seq else PlanState(commit_active)
    assert tracker.view.available is True
    assert tracker.view.state == expected


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 30), st.booleans()), max_size=20), st.randoms())
def test_commits_in_any_order_and_batching_end_at_the_latest(
    commits: list[tuple[int, bool]], rng: random.Random
) -> None:
    tracker = confirmed(seq=-1)
    events = [commit(seq, active) for seq, active in commits]
    rng.shuffle(events)
    while events:
        size = rng.randint(1, 3)
        tracker.on_events(events[:size])
        events = events[size:]
    if commits:
        latest = max(commits, key=lambda c: c[0])[0]
        actives = {active for seq, active in commits if seq == latest}
        assert tracker.view.state is not None
        assert tracker.view.state.active in actives
        assert tracker.view.state.pending is None
    else:
        assert tracker.view.state == PlanState(False)
