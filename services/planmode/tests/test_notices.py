"""The model is told when the user's change contradicts what it last saw."""

from __future__ import annotations

from agenthost.sessionlog.v1 import events_pb2

from services.planmode.controller import PlanModeController
from services.planmode.events import ENTERED_NOTICE, LEFT_NOTICE
from services.planmode.tests.harness import RuntimeDriver, notices, read_all
from services.sessionlog.domain import SessionLog


async def test_no_notice_before_the_first_request(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await controller.set(session_id, True)  # idle, new session
    await runtime.start_turn()
    await controller.set(session_id, False)
    await runtime.model_request()
    assert await notices(log, session_id) == []


async def test_one_notice_across_two_boundaries(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await runtime.start_turn()
    await runtime.model_request()  # the model saw the default mode
    await controller.set(session_id, True)
    await runtime.model_request()
    await runtime.model_request()
    assert await notices(log, session_id) == [ENTERED_NOTICE]


async def test_the_notice_is_recorded_with_the_switch_as_a_plugin_message(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await runtime.start_turn()
    await runtime.model_request()
    await runtime.end_turn()
    before = (await log.get_session(session_id)).last_seq

    await controller.set(session_id, True)  # idle: committed at once

    switch, notice = await read_all(log, session_id, after_seq=before)
    assert switch.plan_mode.active is True
    assert notice.user_message.text == ENTERED_NOTICE
    source = notice.user_message.source
    assert (source.kind, source.plugin, source.form) == (
        events_pb2.SOURCE_KIND_PLUGIN,
        "plan-mode",
        "notice",
    )


async def test_leaving_plan_mode_the_model_saw_is_noticed(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await controller.set(session_id, True)
    await runtime.start_turn()
    await runtime.model_request()  # the model saw plan mode
    await controller.set(session_id, False)
    await runtime.model_request()
    assert await notices(log, session_id) == [LEFT_NOTICE]


async def test_switching_back_after_a_notice_is_noticed_too(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await runtime.start_turn()
    await runtime.model_request()
    await runtime.end_turn()
    await controller.set(session_id, True)
    await controller.set(session_id, False)  # the model was just told of plan mode
    assert await notices(log, session_id) == [ENTERED_NOTICE, LEFT_NOTICE]


async def test_notices_alternate_as_the_model_reads_them(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    """On, off, on while idle: the model reads each switch once, never two
    "switched to plan mode" in a row with the switch off between them unsaid."""
    await runtime.start_turn()
    await runtime.model_request()
    await runtime.end_turn()
    for active in (True, False, True):
        await controller.set(session_id, active)
    await runtime.start_turn()
    await runtime.model_request()
    await controller.set(session_id, True)  # the model saw it: nothing to say
    assert await notices(log, session_id) == [ENTERED_NOTICE, LEFT_NOTICE, ENTERED_NOTICE]


async def test_the_exit_tool_is_not_noticed(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await controller.set(session_id, True)
    await runtime.start_turn()
    await runtime.model_request()
    await controller.exit_plan_mode(session_id)
    await runtime.model_request()
    assert await notices(log, session_id) == []


async def test_a_cancelled_queued_entry_is_not_noticed(
    controller: PlanModeController, runtime: RuntimeDriver, log: SessionLog, session_id: str
) -> None:
    await runtime.start_turn()
    await runtime.model_request()
    await controller.set(session_id, True)
    await controller.set(session_id, False)
    await runtime.model_request()
    assert await notices(log, session_id) == []
