"""The plan facts the controller folds from a session's log."""

from __future__ import annotations

from services.planmode.fold import PlanLogState, apply_event, fold_events
from services.planmode.tests.builders import (
    Event,
    assistant_message,
    command_run,
    numbered,
    plan_mode,
    plan_policy_header,
    request_header,
    turn_end,
    turn_start,
    user_message,
)


def fold(*events: Event) -> PlanLogState:
    return fold_events(PlanLogState(), numbered(events))


def test_an_empty_log_is_inactive_idle_and_unseen_by_any_model() -> None:
    state = fold()
    assert state == PlanLogState(committed=False, turn_open=False, header_plan=None, last_seq=-1)


def test_the_last_plan_mode_event_is_the_committed_state() -> None:
    assert fold(plan_mode(True)).committed is True
    assert fold(plan_mode(True), user_message("hi"), plan_mode(False)).committed is False
    assert fold(plan_mode(True), assistant_message("ok")).committed is True


def test_a_turn_is_open_between_its_start_and_its_end() -> None:
    assert fold(turn_start()).turn_open is True
    assert fold(turn_start(), turn_end()).turn_open is False
    assert fold(turn_start(), turn_end(), turn_start("t2")).turn_open is True


def test_header_plan_follows_the_last_request_header() -> None:
    assert fold(turn_start(), request_header()).header_plan is False
    assert fold(plan_policy_header()).header_plan is True
    assert fold(plan_policy_header(), request_header()).header_plan is False


def test_last_seq_follows_every_event() -> None:
    assert fold(command_run("c1", ""), user_message("hi")).last_seq == 1


def test_folding_an_event_that_changes_nothing_only_moves_last_seq() -> None:
    state = fold(plan_mode(True), turn_start())
    [later] = numbered([assistant_message("thinking")], first_seq=2)
    assert apply_event(state, later) == PlanLogState(
        committed=True, committed_seq=0, turn_open=True, header_plan=None, last_seq=2
    )


def test_the_state_survives_serialisation() -> None:
    state = fold(plan_mode(True), turn_start(), plan_policy_header())
    assert PlanLogState.load(state.dump()) == state
    assert PlanLogState.load(PlanLogState().dump()) == PlanLogState()
