"""`/plan`, `/plan <message>` and `/plan off`, as a user types them."""

from __future__ import annotations

from agenthost.sessionlog.v1 import events_pb2

from agenthost_core.plan import PlanState
from services.planmode.controller import PlanModeController
from services.planmode.projection_unit import PlanProjectionUnit
from services.planmode.tests.harness import RuntimeDriver, plan_mode_values, read_all
from services.projection.unit import View
from services.sessionlog.domain import SessionLog

UNIT = PlanProjectionUnit()


async def projected(log: SessionLog, session_id: str) -> View:
    """What a client would show after a cold refold of the log."""
    state = UNIT.init()
    for event in await read_all(log, session_id):
        state = UNIT.apply(state, event)
    return UNIT.view(state)


async def command_records(
    log: SessionLog, session_id: str
) -> list[events_pb2.CommandRun | events_pb2.CommandDone]:
    events = await read_all(log, session_id)
    return [
        e.command_run if e.HasField("command_run") else e.command_done
        for e in events
        if e.HasField("command_run") or e.HasField("command_done")
    ]


async def test_plan_enters_plan_mode_and_is_logged_as_a_command(
    controller: PlanModeController, log: SessionLog, session_id: str
) -> None:
    result = await controller.run_plan_command(session_id, None, "cmd-1")

    assert result.ok is True
    assert result.message == "Plan mode is on."
    assert result.state == PlanState(active=True)
    assert result.steer_text is None
    assert result.as_of_seq == (await log.get_session(session_id)).last_seq
    run, done = await command_records(log, session_id)
    assert isinstance(run, events_pb2.CommandRun)
    assert (run.command_id, run.name, run.HasField("args"), run.args) == ("cmd-1", "plan", True, "")
    assert isinstance(done, events_pb2.CommandDone)
    assert (done.command_id, done.kind, done.message) == (
        "cmd-1",
        events_pb2.COMMAND_DONE_KIND_SUCCESS,
        "Plan mode is on.",
    )
    assert await projected(log, session_id) == {"active": True}


async def test_plan_with_a_message_enters_then_steers_the_message(
    controller: PlanModeController, log: SessionLog, session_id: str
) -> None:
    result = await controller.run_plan_command(session_id, "  design the cache layer \n", "c")
    assert result.ok is True
    assert result.state == PlanState(active=True)
    assert result.steer_text == "design the cache layer"
    # The message is the runtime's to send: the command itself records no user message.
    events = await read_all(log, session_id)
    assert not any(e.HasField("user_message") for e in events)


async def test_plan_off_leaves_plan_mode_and_sends_nothing(
    controller: PlanModeController, log: SessionLog, session_id: str
) -> None:
    await controller.run_plan_command(session_id, None, "c1")
    result = await controller.run_plan_command(session_id, " off ", "c2")
    assert (result.ok, result.message) == (True, "Plan mode is off.")
    assert (result.state, result.steer_text) == (PlanState(active=False), None)
    assert await plan_mode_values(log, session_id) == [True, False]
    assert await projected(log, session_id) == {"active": False}


async def test_plan_off_cancels_a_queued_entry(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await runtime.start_turn()
    queued = await controller.run_plan_command(session_id, "", "c1")
    assert queued.message == "Plan mode will turn on before the next model request."
    assert queued.state == PlanState(active=False, pending=True)
    assert await projected(log, session_id) == {"active": False, "pending": True}

    cancelled = await controller.run_plan_command(session_id, "off", "c2")
    assert cancelled.ok is True
    assert cancelled.state == PlanState(active=False)
    assert "Cancelled" in cancelled.message
    assert await projected(log, session_id) == {"active": False}
    await runtime.model_request()
    assert await plan_mode_values(log, session_id) == []


async def test_a_queued_plan_is_pending_in_the_projection_until_the_boundary(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await runtime.start_turn()
    await controller.run_plan_command(session_id, None, "c1")
    assert await projected(log, session_id) == {"active": False, "pending": True}
    await runtime.model_request()
    assert await projected(log, session_id) == {"active": True}


async def test_plan_off_with_more_text_is_an_error_that_changes_nothing(
    controller: PlanModeController, log: SessionLog, session_id: str
) -> None:
    await controller.run_plan_command(session_id, None, "c1")

    result = await controller.run_plan_command(session_id, "off and stop planning", "c2")

    assert result.ok is False
    assert "/plan off" in result.message
    assert (result.state, result.steer_text) == (PlanState(active=True), None)
    assert await plan_mode_values(log, session_id) == [True]
    run, done = (await command_records(log, session_id))[2:]
    assert isinstance(run, events_pb2.CommandRun) and run.args == "off and stop planning"
    assert isinstance(done, events_pb2.CommandDone)
    assert (done.kind, done.message) == (events_pb2.COMMAND_DONE_KIND_ERROR, result.message)
    assert await projected(log, session_id) == {"active": True}


async def test_a_failed_command_leaves_an_earlier_queued_plan_pending(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await runtime.start_turn()
    await controller.run_plan_command(session_id, None, "c1")
    await controller.run_plan_command(session_id, "off now", "c2")
    assert (await controller.get(session_id)).state == PlanState(active=False, pending=True)
    assert await projected(log, session_id) == {"active": False, "pending": True}


async def test_a_command_without_an_id_gets_one(
    controller: PlanModeController, log: SessionLog, session_id: str
) -> None:
    await controller.run_plan_command(session_id, None, "")
    run, done = await command_records(log, session_id)
    assert run.command_id
    assert done.command_id == run.command_id


async def test_a_word_that_starts_with_off_is_a_message(
    controller: PlanModeController, session_id: str
) -> None:
    result = await controller.run_plan_command(session_id, "offload the queue", "c1")
    assert (result.ok, result.steer_text) == (True, "offload the queue")
    assert result.state == PlanState(active=True)


async def test_repeating_plan_reports_that_nothing_changed(
    controller: PlanModeController, session_id: str
) -> None:
    await controller.run_plan_command(session_id, None, "c1")
    again = await controller.run_plan_command(session_id, None, "c2")
    assert (again.ok, again.message) == (True, "Plan mode is already on.")
