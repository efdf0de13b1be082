"""The plan-mode controller against the real session log on SQLite."""

from __future__ import annotations

import pytest
from agenthost.sessionlog.v1 import events_pb2

from agenthost_core.plan import PlanState
from services.common.errors import LeaseLost, SessionNotFound
from services.planmode.config import DEFAULT_SECTION, PlanModeConfig
from services.planmode.controller import PlanModeController, SetOutcome
from services.planmode.errors import PlanModeInactive
from services.planmode.tests.builders import plan_mode
from services.planmode.tests.failing_log import AppendOutage
from services.planmode.tests.harness import RuntimeDriver, last_seq, plan_mode_values, read_all
from services.sessionlog.domain import SessionLog

POLICY = events_pb2.PromptSection(id="plan:policy", order=50, text=DEFAULT_SECTION)


# -- Get -----------------------------------------------------------------------------


async def test_a_new_session_is_inactive_with_nothing_pending(
    controller: PlanModeController, session_id: str
) -> None:
    state, as_of_seq = await controller.get(session_id)
    assert state == PlanState(active=False)
    assert as_of_seq == -1


async def test_the_committed_state_is_the_last_plan_mode_of_the_log(
    controller: PlanModeController, log: SessionLog, session_id: str
) -> None:
    await log.append(session_id, [plan_mode(True), plan_mode(False), plan_mode(True)])
    assert await controller.get(session_id) == (PlanState(active=True), 2)


async def test_a_fork_inherits_the_committed_state(
    controller: PlanModeController, log: SessionLog, session_id: str
) -> None:
    await controller.set(session_id, True)
    fork = await log.fork(session_id)
    assert (await controller.get(fork.id)).state == PlanState(active=True)


async def test_an_unknown_session_is_not_found(controller: PlanModeController) -> None:
    with pytest.raises(SessionNotFound):
        await controller.get("nope")
    with pytest.raises(SessionNotFound):
        await controller.set("nope", True)
    with pytest.raises(SessionNotFound):
        await controller.apply_at_boundary("nope")
    with pytest.raises(SessionNotFound):
        await controller.exit_plan_mode("nope")


# -- Set: the outcome table ----------------------------------------------------------------


async def test_while_a_turn_runs_a_selection_waits_for_the_boundary(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await runtime.start_turn()
    before = await last_seq(log, session_id)

    assert (await controller.set(session_id, False)).outcome is SetOutcome.NOOP
    queued = await controller.set(session_id, True)
    assert queued.outcome is SetOutcome.QUEUED
    assert queued.state == PlanState(active=False, pending=True)
    assert (await controller.set(session_id, True)).outcome is SetOutcome.NOOP
    assert (await controller.get(session_id)).state == PlanState(active=False, pending=True)
    # Only the selection is recorded (no plan/mode before the boundary).
    recorded = await read_all(log, session_id, after_seq=before)
    assert [e.WhichOneof("body") for e in recorded] == ["plan_selection"]
    assert recorded[0].plan_selection.active is True


async def test_an_idle_agent_commits_at_once(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    entered = await controller.set(session_id, True)
    assert entered.outcome is SetOutcome.COMMITTED
    assert entered.state == PlanState(active=True)
    assert entered.as_of_seq == await last_seq(log, session_id)
    left = await controller.set(session_id, False)
    assert (left.outcome, left.state) == (SetOutcome.COMMITTED, PlanState(active=False))

    before = await last_seq(log, session_id)
    boundary = await controller.apply_at_boundary(session_id)
    assert await last_seq(log, session_id) == before
    assert boundary.sections == []
    assert await plan_mode_values(log, session_id) == [True, False]


async def test_choosing_the_committed_state_again_cancels_a_queued_selection(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await runtime.start_turn()
    await controller.set(session_id, True)
    before = await last_seq(log, session_id)

    cancelled = await controller.set(session_id, False)
    assert cancelled.outcome is SetOutcome.CANCELLED
    assert cancelled.state == PlanState(active=False)
    # The reverting selection is recorded, never a plan/mode.
    recorded = await read_all(log, session_id, after_seq=before)
    assert [(e.WhichOneof("body"), e.plan_selection.active) for e in recorded] == [
        ("plan_selection", False)
    ]
    assert (await controller.get(session_id)).state == PlanState(active=False)

    boundary = await runtime.model_request()
    assert boundary.state == PlanState(active=False)
    assert await plan_mode_values(log, session_id) == []


async def test_an_idle_agent_with_a_leftover_selection_cancels_or_commits_it(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    # Cancel stops a turn before any further boundary: the selection outlives it.
    await runtime.start_turn()
    await controller.set(session_id, True)
    await runtime.end_turn()
    assert (await controller.get(session_id)).state == PlanState(active=False, pending=True)
    assert (await controller.set(session_id, False)).outcome is SetOutcome.CANCELLED

    await runtime.start_turn()
    await controller.set(session_id, True)
    await runtime.end_turn()
    committed = await controller.set(session_id, True)
    assert (committed.outcome, committed.state) == (SetOutcome.COMMITTED, PlanState(True))
    assert await plan_mode_values(log, session_id) == [True]


async def test_a_turn_started_by_another_writer_is_seen_before_deciding(
    controller: PlanModeController, log: SessionLog, session_id: str
) -> None:
    await controller.get(session_id)  # the controller has folded the empty log
    other = RuntimeDriver(log, controller, session_id)
    await other.start_turn()
    assert (await controller.set(session_id, True)).outcome is SetOutcome.QUEUED
    assert await plan_mode_values(log, session_id) == []


async def test_a_choice_asked_when_idle_is_deferred_while_the_log_shows_a_turn_open(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    entered = await controller.set_when_idle(session_id, True)
    assert entered is not None and entered.outcome is SetOutcome.COMMITTED
    await RuntimeDriver(log, PlanModeController(log), session_id).start_turn()  # unseen here
    before = await last_seq(log, session_id)
    assert await controller.set_when_idle(session_id, False) is None
    assert await last_seq(log, session_id) == before
    await runtime.end_turn()
    left = await controller.set_when_idle(session_id, False)
    assert left is not None and left.state == PlanState(active=False)
    assert await plan_mode_values(log, session_id) == [True, False]


# -- the folded state is a cache: what reaches the log ---------------------------------------


async def test_an_idle_commit_on_a_folded_session_is_one_append_and_no_read(
    log: SessionLog, session_id: str
) -> None:
    counted = AppendOutage(log)
    controller = PlanModeController(counted)
    await controller.set(session_id, True)  # folds the log
    counted.calls.clear()
    left = await controller.set(session_id, False)
    assert (left.outcome, left.state) == (SetOutcome.COMMITTED, PlanState(active=False))
    assert left.as_of_seq == await last_seq(log, session_id)
    assert counted.calls == {"append": 1}


async def test_a_choice_that_records_nothing_is_checked_against_the_log(
    log: SessionLog, session_id: str
) -> None:
    here, there = PlanModeController(log), PlanModeController(log)
    await here.set(session_id, True)
    await there.set(session_id, False)  # another replica; `here` still folds active
    entered = await here.set(session_id, True)
    assert (entered.outcome, entered.state) == (SetOutcome.COMMITTED, PlanState(active=True))
    assert await plan_mode_values(log, session_id) == [True, False, True]


async def test_an_exit_is_checked_against_the_log_before_it_fails(
    log: SessionLog, session_id: str
) -> None:
    here, there = PlanModeController(log), PlanModeController(log)
    await here.get(session_id)  # folds inactive
    await there.set(session_id, True)
    assert (await here.exit_plan_mode(session_id)).state == PlanState(active=False)
    assert await plan_mode_values(log, session_id) == [True, False]


async def test_a_boundary_with_nothing_pending_reads_the_log_once(
    log: SessionLog, session_id: str
) -> None:
    counted = AppendOutage(log)
    runtime = RuntimeDriver(log, PlanModeController(counted), session_id)
    await runtime.start_turn()
    await runtime.model_request()  # loads the session
    counted.calls.clear()
    await runtime.model_request()
    assert counted.calls == {"read": 1}


# -- the boundary ----------------------------------------------------------------------------


async def test_the_boundary_applies_a_queued_selection_once(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await runtime.start_turn()
    await controller.set(session_id, True)

    first = await controller.apply_at_boundary(session_id)
    assert first.applied is True
    assert first.state == PlanState(active=True)
    assert list(first.sections) == [POLICY]
    assert first.as_of_seq == await last_seq(log, session_id)

    second = await controller.apply_at_boundary(session_id)
    assert second.as_of_seq == first.as_of_seq
    assert list(second.sections) == [POLICY]
    assert await plan_mode_values(log, session_id) == [True]


async def test_the_policy_is_the_configured_section_and_only_while_active(
    log: SessionLog, session_id: str
) -> None:
    section = "Plan first.\nPresent the plan through exit_plan_mode.\n"
    controller = PlanModeController(log, PlanModeConfig(section=section))
    assert (await controller.apply_at_boundary(session_id)).sections == []

    await controller.set(session_id, True)
    [policy] = (await controller.apply_at_boundary(session_id)).sections
    assert (policy.id, policy.order, policy.text) == ("plan:policy", 50, section)


async def test_a_boundary_leaves_plan_mode_when_the_user_chose_default(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await controller.set(session_id, True)
    await runtime.start_turn()
    await runtime.model_request()
    assert (await controller.set(session_id, False)).outcome is SetOutcome.QUEUED

    boundary = await runtime.model_request()
    assert (boundary.state, boundary.sections) == (PlanState(active=False), [])
    assert await plan_mode_values(log, session_id) == [True, False]


# -- exit_plan_mode ----------------------------------------------------------------------------


async def test_exit_outside_plan_mode_fails_and_records_nothing(
    controller: PlanModeController, log: SessionLog, session_id: str
) -> None:
    with pytest.raises(PlanModeInactive) as raised:
        await controller.exit_plan_mode(session_id)
    assert raised.value.reason == "PLAN_MODE_INACTIVE"
    assert raised.value.status == "FAILED_PRECONDITION"
    assert await last_seq(log, session_id) == -1


async def test_exit_leaves_plan_mode_and_drops_a_queued_selection(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await controller.set(session_id, True)
    await runtime.start_turn()
    await runtime.model_request()
    await controller.set(session_id, False)

    state, as_of_seq = await controller.exit_plan_mode(session_id)
    assert state == PlanState(active=False)
    assert as_of_seq == await last_seq(log, session_id)
    assert (await controller.get(session_id)).state == PlanState(active=False)

    before = await last_seq(log, session_id)
    await controller.apply_at_boundary(session_id)
    assert await last_seq(log, session_id) == before
    assert await plan_mode_values(log, session_id) == [True, False]


async def test_a_selection_made_before_an_exit_does_not_come_back(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    # Enter while a turn runs, apply at a boundary, then the model exits: the
    # already-applied selection must not re-enter plan mode at a later boundary.
    await runtime.start_turn()
    await controller.set(session_id, True)
    await runtime.model_request()
    await controller.exit_plan_mode(session_id)

    boundary = await runtime.model_request()
    assert boundary.state == PlanState(active=False)
    assert await plan_mode_values(log, session_id) == [True, False]


async def test_the_events_of_a_commit_are_complete_log_values(
    controller: PlanModeController, log: SessionLog, session_id: str
) -> None:
    await controller.set(session_id, True)
    [event] = await read_all(log, session_id)
    assert event.WhichOneof("body") == "plan_mode"
    assert event.id
    assert event.HasField("time")


# -- under a runtime's session lease ---------------------------------------------------------


async def test_a_deposed_runtimes_boundary_and_exit_write_nothing(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    deposed = await log.acquire_lease(session_id, "runtime-a", 10.0)
    await log.release_lease(session_id, "runtime-a", deposed.token)
    owner = await log.acquire_lease(session_id, "runtime-b", 10.0)
    await runtime.start_turn()
    assert (await controller.set(session_id, True)).outcome is SetOutcome.QUEUED
    before = await last_seq(log, session_id)

    stale = await controller.apply_at_boundary(session_id, deposed.token)
    assert not stale.applied and stale.state == PlanState(active=False, pending=True)
    assert await last_seq(log, session_id) == before
    applied = await controller.apply_at_boundary(session_id, owner.token)
    assert applied.applied and applied.state == PlanState(active=True)

    with pytest.raises(LeaseLost):
        await controller.exit_plan_mode(session_id, deposed.token)
    assert (await controller.get(session_id)).state == PlanState(active=True)
    await controller.exit_plan_mode(session_id, owner.token)
    assert (await controller.get(session_id)).state == PlanState(active=False)
