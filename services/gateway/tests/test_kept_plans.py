"""The gateway's plan views: a projection snapshot joined to the relayed
events answers exactly what folding the whole log answers, and answers only
while it is as new as anything the gateway knows."""

from __future__ import annotations

import asyncio

from agenthost.sessionlog.v1 import events_pb2 as ev
from hypothesis import given
from hypothesis import strategies as st

from agenthost_core.folds import fold_plan
from agenthost_core.plan import PlanState
from services.gateway.kept_plans import KeptPlans
from tests.support.events import plan_mode, user

SESSION = "s"


def numbered(events: list[ev.Event]) -> list[ev.Event]:
    """Copies, as the session's events from seq 1."""
    copies = []
    for seq, event in enumerate(events, start=1):
        copy = ev.Event()
        copy.CopyFrom(event)
        copy.session_id, copy.seq = SESSION, seq
        copies.append(copy)
    return copies


def folded(events: list[ev.Event]) -> PlanState:
    state = PlanState()
    for event in events:
        state = fold_plan(state, event)
    return state


plan_events = st.lists(
    st.one_of(
        st.booleans().map(plan_mode),
        st.booleans().map(lambda a: ev.Event(plan_selection=ev.PlanSelection(active=a))),
        st.just(user("hello")),
    ),
    min_size=1,
    max_size=30,
)


@given(plan_events, st.data())
def test_a_seed_plus_the_events_after_it_reads_as_the_fold_of_the_whole_log(
    raw: list[ev.Event], data: st.DataObject
) -> None:
    events = numbered(raw)
    at = data.draw(st.integers(0, len(events)))
    views = KeptPlans()
    for event in events[:at]:
        views.on_event(event)  # the gateway saw these before anyone read
    views.seed(SESSION, folded(events[:at]), at)
    for event in events[at:]:
        views.on_event(event)
    assert views.read(SESSION) == (folded(events), len(events))


def test_a_seed_older_than_an_event_already_received_is_not_kept() -> None:
    events = numbered([plan_mode(True), plan_mode(False)])
    views = KeptPlans()
    for event in events:
        views.on_event(event)
    views.seed(SESSION, folded(events[:1]), 1)  # the snapshot missed seq 2
    assert views.read(SESSION) is None
    assert views.known_seq(SESSION) == 2


def test_a_gap_in_the_events_drops_the_view() -> None:
    events = numbered([plan_mode(True), user("a"), plan_mode(False)])
    views = KeptPlans()
    views.seed(SESSION, folded(events[:1]), 1)
    views.on_event(events[2])  # seq 2 never arrived
    assert views.read(SESSION) is None


def test_a_write_acknowledged_past_the_view_is_read_through_until_it_arrives() -> None:
    events = numbered([plan_mode(False), plan_mode(True)])
    views = KeptPlans()
    views.seed(SESSION, folded(events[:1]), 1)
    views.acknowledged(SESSION, 2)  # this gateway's SetPlanMode landed at seq 2
    assert views.read(SESSION) is None
    assert views.known_seq(SESSION) == 2
    views.on_event(events[1])
    assert views.read(SESSION) == (PlanState(True), 2)


def test_an_older_seed_never_replaces_a_newer_view() -> None:
    events = numbered([plan_mode(True), user("a")])
    views = KeptPlans()
    views.seed(SESSION, folded(events), 2)
    views.seed(SESSION, folded([]), 0)
    assert views.read(SESSION) == (PlanState(True), 2)


def test_a_forgotten_session_is_read_through_again() -> None:
    views = KeptPlans(kept=1)
    views.seed("a", PlanState(True), 1)
    views.seed("b", PlanState(False), 1)
    assert views.read("a") is None
    assert views.read("b") == (PlanState(False), 1)


async def test_a_read_right_after_a_write_waits_for_the_follower_to_deliver_it() -> None:
    events = numbered([plan_mode(False), plan_mode(True)])
    views = KeptPlans()
    views.seed(SESSION, folded(events[:1]), 1)
    views.acknowledged(SESSION, 2)
    reading = asyncio.ensure_future(views.read_soon(SESSION, within_s=30))
    await asyncio.sleep(0)  # the read is waiting: nothing delivered seq 2 yet
    assert not reading.done()
    views.on_event(events[1])
    assert await asyncio.wait_for(reading, 30) == (PlanState(True), 2)


async def test_a_read_the_follower_cannot_answer_gives_up_at_once() -> None:
    views = KeptPlans()
    views.seed(SESSION, PlanState(False), 1)
    views.on_event(numbered([user("a"), user("b"), user("c")])[2])  # a gap: seq 2 is unknown
    assert await asyncio.wait_for(views.read_soon(SESSION, within_s=30), 1) is None


def test_a_write_another_replica_acknowledged_is_read_through_until_it_arrives() -> None:
    events = numbered([plan_mode(False), plan_mode(True)])
    views = KeptPlans()
    views.seed(SESSION, folded(events[:1]), 1)
    # The client saw its write acknowledged at seq 2 by another gateway: this
    # one's view (as of 1) is all it knows of, yet not what the client asks.
    assert views.read(SESSION) == (PlanState(False), 1)
    assert views.read(SESSION, at_least=2) is None
    assert views.known_seq(SESSION, at_least=2) == 2
    views.on_event(events[1])
    assert views.read(SESSION, at_least=2) == (PlanState(True), 2)


async def test_a_read_for_a_write_elsewhere_waits_for_the_follower_to_deliver_it() -> None:
    events = numbered([plan_mode(False), plan_mode(True)])
    views = KeptPlans()
    views.seed(SESSION, folded(events[:1]), 1)
    reading = asyncio.ensure_future(views.read_soon(SESSION, at_least=2, within_s=30))
    await asyncio.sleep(0)  # the read is waiting: nothing delivered seq 2 yet
    assert not reading.done()
    views.on_event(events[1])
    assert await asyncio.wait_for(reading, 30) == (PlanState(True), 2)
