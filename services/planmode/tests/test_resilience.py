"""A failed append at the boundary never fails the step, and a queued
selection survives a restart of the plan-mode service (it is in the log)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agenthost_core.plan import PlanState
from services.planmode.controller import PlanModeController, SetOutcome
from services.planmode.events import ENTERED_NOTICE
from services.planmode.tests.builders import plan_mode, turn_start
from services.planmode.tests.failing_log import AppendOutage
from services.planmode.tests.harness import RuntimeDriver, notices, plan_mode_values
from services.sessionlog.domain import SessionLog, open_session_log


async def test_a_boundary_during_an_append_outage_keeps_the_selection_pending(
    log: SessionLog,
    session_id: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    outage = AppendOutage(log)
    controller = PlanModeController(outage)
    runtime = RuntimeDriver(log, controller, session_id)
    await runtime.start_turn()
    await runtime.model_request()
    await controller.set(session_id, True)

    outage.on = True
    with caplog.at_level(logging.WARNING, logger="services.planmode"):
        failed = await runtime.model_request()
    assert failed.applied is False
    assert failed.state == PlanState(active=False, pending=True)
    assert failed.sections == []
    assert any("stays pending" in r.getMessage() for r in caplog.records)
    assert await plan_mode_values(log, session_id) == []
    assert (await controller.get(session_id)).state == PlanState(active=False, pending=True)

    outage.on = False
    healed = await runtime.model_request()
    assert (healed.applied, healed.state) == (True, PlanState(active=True))
    assert [s.id for s in healed.sections] == ["plan:policy"]
    assert await plan_mode_values(log, session_id) == [True]
    assert await notices(log, session_id) == [ENTERED_NOTICE]


async def test_a_queued_selection_survives_a_restart(tmp_path: Path) -> None:
    log_path = tmp_path / "log.db"
    async with open_session_log(log_path) as log:
        session, _ = await log.create_session("s-restart", "/home/dev/project")
        runtime = RuntimeDriver(log, PlanModeController(log), session.id)
        await runtime.start_turn()
        queued = await runtime.controller.set(session.id, True)
        assert queued.outcome is SetOutcome.QUEUED

    async with open_session_log(log_path) as log:
        controller = PlanModeController(log)
        assert (await controller.get("s-restart")).state == PlanState(active=False, pending=True)
        boundary = await controller.apply_at_boundary("s-restart")
        assert boundary.state == PlanState(active=True)
        assert await plan_mode_values(log, "s-restart") == [True]


async def test_a_small_cache_still_gives_every_session_its_own_state(log: SessionLog) -> None:
    controller = PlanModeController(log, cache_size=2)
    ids = []
    for n in range(5):
        summary, _ = await log.create_session(f"s-{n}", "/home/dev/project")
        ids.append(summary.id)
        await controller.set(summary.id, n % 2 == 0)
    for n, session_id in enumerate(ids):
        assert (await controller.get(session_id)).state == PlanState(active=n % 2 == 0)


async def test_a_selection_outdated_by_a_later_commit_is_never_applied(
    controller: PlanModeController, log: SessionLog, session_id: str
) -> None:
    # A selection was made during a turn; since then a boundary committed it
    # and the model left plan mode.
    await log.append(session_id, [turn_start()])
    assert (await controller.set(session_id, True)).outcome is SetOutcome.QUEUED
    await log.append(session_id, [plan_mode(True), plan_mode(False)])

    assert (await controller.get(session_id)).state == PlanState(active=False)
    boundary = await controller.apply_at_boundary(session_id)
    assert (boundary.state, boundary.sections) == (PlanState(active=False), [])
    assert await plan_mode_values(log, session_id) == [True, False]


async def test_the_pending_choice_is_read_from_the_log_by_any_replica(
    controller: PlanModeController, log: SessionLog, session_id: str
) -> None:
    await log.append(session_id, [turn_start()])
    await controller.set(session_id, True)
    other = PlanModeController(log)
    assert (await other.get(session_id)).state == PlanState(active=False, pending=True)
    assert (await other.set(session_id, False)).outcome is SetOutcome.CANCELLED
    assert (await controller.get(session_id)).state == PlanState(active=False)
