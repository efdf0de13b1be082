"""The `plan` projection: what a client shows, from the log alone, in the
shape of PlanModeState (`pending` only while it differs from `active`)."""

from __future__ import annotations

from agenthost_core.plan import PlanState
from services.planmode.projection_unit import PlanProjectionUnit
from services.planmode.tests.builders import (
    Event,
    assistant_message,
    command_done,
    command_run,
    numbered,
    plan_mode,
    plan_selection,
    request_header,
    turn_start,
    user_message,
)
from services.projection.service import default_registry
from services.projection.unit import ProjectionUnit, View

UNIT = PlanProjectionUnit()


def view_after(*events: Event) -> View:
    state = UNIT.init()
    for event in numbered(events):
        state = UNIT.apply(state, event)
    return UNIT.view(state)


def test_it_is_the_plan_unit_of_the_projection_registry() -> None:
    unit: ProjectionUnit[PlanState] = UNIT
    assert (unit.key, unit.state_version) == ("plan", 3)
    assert "plan" in default_registry()
    assert "plan" not in default_registry(with_plan_mode=False)


def test_an_empty_log_is_inactive_and_not_pending() -> None:
    assert view_after() == {"active": False}


def test_a_selection_is_pending_until_plan_mode_commits_it() -> None:
    assert view_after(plan_selection(True)) == {"active": False, "pending": True}
    assert view_after(plan_selection(True), plan_mode(True)) == {"active": True}


def test_choosing_the_committed_state_again_is_not_pending() -> None:
    assert view_after(plan_selection(True), plan_selection(False)) == {"active": False}
    assert view_after(plan_mode(True), plan_selection(True)) == {"active": True}


def test_a_selection_made_before_a_commit_does_not_come_back() -> None:
    events = (plan_selection(True), plan_mode(True), plan_mode(False))
    assert view_after(*events) == {"active": False}


def test_commands_alone_select_nothing() -> None:
    # /plan records its intent as plan/selection; the command events are display.
    events = (command_run("c1", ""), command_done("c1", ok=True), command_run("c2", "off"))
    assert view_after(*events) == {"active": False}


def test_unrelated_events_return_the_same_state_object() -> None:
    state = UNIT.apply(UNIT.init(), numbered([plan_selection(True)])[0])
    for event in numbered(
        [turn_start(), user_message("hi"), assistant_message("ok"), request_header()]
    ):
        if event.WhichOneof("body") != "request_header":
            assert UNIT.apply(state, event) is state


def test_the_state_survives_a_checkpoint() -> None:
    state = UNIT.init()
    for event in numbered([plan_mode(True), plan_selection(False), request_header()]):
        state = UNIT.apply(state, event)
    assert UNIT.load(UNIT.dump(state)) == state
