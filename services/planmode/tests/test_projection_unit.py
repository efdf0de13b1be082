"""The `plan` projection: what a client shows, from the log alone."""

from __future__ import annotations

from services.planmode.projection_unit import PlanProjectionUnit, PlanUnitState
from services.planmode.tests.builders import (
    Event,
    assistant_message,
    command_done,
    command_run,
    numbered,
    plan_mode,
    request_header,
    turn_start,
    user_message,
)
from services.projection.unit import ProjectionUnit, View

UNIT = PlanProjectionUnit()


def view_after(*events: Event) -> View:
    state = UNIT.init()
    for event in numbered(events):
        state = UNIT.apply(state, event)
    return UNIT.view(state)


def test_it_is_the_plan_unit_of_the_projection_registry() -> None:
    unit: ProjectionUnit[PlanUnitState] = UNIT
    assert (unit.key, unit.state_version) == ("plan", 1)


def test_an_empty_log_is_inactive_and_not_pending() -> None:
    assert view_after() == {"active": False, "pending": False}


def test_a_bare_plan_command_is_pending_until_plan_mode_commits_it() -> None:
    run = command_run("c1", "")
    assert view_after(run) == {"active": False, "pending": True}
    assert view_after(run, command_done("c1", ok=True)) == {"active": False, "pending": True}
    committed = (run, command_done("c1", ok=True), plan_mode(True))
    assert view_after(*committed) == {"active": True, "pending": False}


def test_a_failed_command_drops_its_selection() -> None:
    assert view_after(command_run("c1", ""), command_done("c1", ok=False)) == {
        "active": False,
        "pending": False,
    }


def test_a_failed_command_keeps_the_selection_an_earlier_command_queued() -> None:
    events = (
        command_run("c1", ""),
        command_done("c1", ok=True),
        command_run("c2", "off please"),
        command_done("c2", ok=False),
    )
    assert view_after(*events) == {"active": False, "pending": True}


def test_the_error_of_another_command_changes_nothing() -> None:
    events = (command_run("c1", ""), command_done("other", ok=False))
    assert view_after(*events) == {"active": False, "pending": True}


def test_off_means_off_whatever_the_surrounding_blanks() -> None:
    active = (plan_mode(True),)
    assert view_after(*active, command_run("c1", " off ")) == {"active": True, "pending": True}
    assert view_after(command_run("c1", "off")) == {"active": False, "pending": False}


def test_any_other_argument_selects_plan_mode() -> None:
    assert view_after(command_run("c1", "design the cache")) == {"active": False, "pending": True}


def test_choosing_the_committed_state_is_not_pending() -> None:
    assert view_after(plan_mode(True), command_run("c1", "")) == {"active": True, "pending": False}
    queued_then_reverted = (command_run("c1", ""), command_run("c2", "off"))
    assert view_after(*queued_then_reverted) == {"active": False, "pending": False}


def test_a_run_without_recorded_args_is_ignored() -> None:
    state = UNIT.init()
    [run] = numbered([command_run("c1", None)])
    assert UNIT.apply(state, run) is state


def test_other_commands_are_ignored() -> None:
    state = UNIT.init()
    [run] = numbered([command_run("c1", "", name="compact")])
    assert UNIT.apply(state, run) is state


def test_unrelated_events_return_the_same_state_object() -> None:
    state = UNIT.apply(UNIT.init(), numbered([command_run("c1", "")])[0])
    unrelated: list[Event] = [
        turn_start(),
        request_header(),
        user_message("hi"),
        assistant_message("hello"),
        command_done("c1", ok=True),
    ]
    for event in numbered(unrelated, first_seq=1):
        assert UNIT.apply(state, event) is state


def test_the_state_survives_a_checkpoint() -> None:
    state = UNIT.init()
    for event in numbered([plan_mode(True), command_run("c1", "off"), command_run("c2", "x")]):
        state = UNIT.apply(state, event)
    assert UNIT.load(UNIT.dump(state)) == state
    assert UNIT.load(UNIT.dump(UNIT.init())) == UNIT.init()
