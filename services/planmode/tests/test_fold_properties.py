"""Folding is order-only: incremental, cold and checkpointed folds agree."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from services.planmode.fold import PlanLogState, fold_events
from services.planmode.projection_unit import PlanProjectionUnit, PlanUnitState
from services.planmode.tests.builders import (
    Event,
    assistant_message,
    command_done,
    command_run,
    numbered,
    plan_mode,
    plan_policy_header,
    request_header,
    turn_end,
    turn_start,
    user_message,
)

UNIT = PlanProjectionUnit()
PLAN_KINDS = frozenset({"command_run", "command_done", "plan_mode"})

command_ids = st.sampled_from(["c1", "c2", "c3"])
plan_args = st.one_of(
    st.none(),
    st.sampled_from(["", " ", "off", " off ", "off extra", "offload", "design the cache"]),
    st.text(max_size=6),
)
any_event = st.one_of(
    st.builds(turn_start),
    st.builds(turn_end),
    st.booleans().map(lambda plan: plan_policy_header() if plan else request_header()),
    st.booleans().map(plan_mode),
    st.builds(command_run, command_ids, plan_args, st.sampled_from(["plan", "plan", "compact"])),
    st.builds(command_done, command_ids, st.booleans()),
    st.text(max_size=4).map(user_message),
    st.text(max_size=4).map(assistant_message),
)
logs = st.lists(any_event, max_size=40).map(numbered)


def unit_fold(state: PlanUnitState, events: list[Event]) -> PlanUnitState:
    for event in events:
        state = UNIT.apply(state, event)
    return state


def fold_in_chunks(events: list[Event], cuts: list[int]) -> PlanLogState:
    state = PlanLogState()
    bounds = [0, *sorted(cuts), len(events)]
    for start, end in itertools.pairwise(bounds):
        state = fold_events(state, events[start:end])
    return state


@given(logs, st.data())
def test_plan_log_state_is_the_same_however_it_is_folded(
    events: list[Event], data: st.DataObject
) -> None:
    positions = st.integers(0, len(events))
    cuts = data.draw(st.lists(positions, max_size=5))
    k = data.draw(positions)

    cold = fold_events(PlanLogState(), events)
    checkpoint = PlanLogState.load(fold_events(PlanLogState(), events[:k]).dump())

    assert fold_in_chunks(events, cuts) == cold
    assert fold_events(checkpoint, events[k:]) == cold


@given(logs, st.data())
def test_the_plan_unit_is_the_same_however_it_is_folded(
    events: list[Event], data: st.DataObject
) -> None:
    k = data.draw(st.integers(0, len(events)))

    cold = unit_fold(UNIT.init(), events)
    incremental = unit_fold(unit_fold(UNIT.init(), events[:k]), events[k:])
    resumed = unit_fold(UNIT.load(UNIT.dump(unit_fold(UNIT.init(), events[:k]))), events[k:])

    assert incremental == cold
    assert resumed == cold
    assert UNIT.view(resumed) == UNIT.view(cold)


@given(logs)
def test_events_outside_plan_mode_never_touch_the_unit_state(events: list[Event]) -> None:
    state = UNIT.init()
    for event in events:
        after = UNIT.apply(state, event)
        if event.WhichOneof("body") not in PLAN_KINDS:
            assert after is state
        state = after


@given(logs)
def test_pending_is_never_shown_right_after_a_commit(events: list[Event]) -> None:
    state = unit_fold(UNIT.init(), events)
    [commit] = numbered([plan_mode(True)], first_seq=len(events))
    assert UNIT.view(UNIT.apply(state, commit)) == {"active": True, "pending": False}
