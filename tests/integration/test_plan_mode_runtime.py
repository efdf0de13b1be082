"""Plan mode with real turns: session log, plan mode and agent runtime running
as gRPC services on loopback; the model is the scripted built-in adapter."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import PLAN_POLICY_SECTION_ID, SessionState, fold_events
from services.agentruntime.models.base import ModelError
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply, ScriptedToolCall
from services.agentruntime.plan_tools import DISMISSED, NOT_A_PLAN, NOT_IN_PLAN_MODE, NOT_UNDERSTOOD
from services.planmode.config import DEFAULT_SECTION
from tests.support.rpc import expect_rpc_error, reason_of
from tests.support.stack import WAIT_S, Stack, running_stack

SID = "s1"
PLAN = "# Plan\n\n1. Read the code.\n2. Change it."


@pytest.fixture
def model() -> BuiltinAdapter:
    return BuiltinAdapter()


@pytest.fixture
async def stack(tmp_path: Path, model: BuiltinAdapter) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path, model=model) as running:
        await running.log.create_session(SID, "/work/project")
        yield running


# -- helpers -------------------------------------------------------------------


async def prompt(
    stack: Stack, text: str, mode: rt.PromptMode.ValueType = rt.PROMPT_MODE_SEND
) -> rt.PromptResponse:
    reply: rt.PromptResponse = await stack.runtime.Prompt(
        rt.PromptRequest(session_id=SID, text=text, mode=mode)
    )
    return reply


async def set_plan(stack: Stack, active: bool) -> pm.SetPlanModeResponse:
    reply: pm.SetPlanModeResponse = await stack.plan.SetPlanMode(
        pm.SetPlanModeRequest(session_id=SID, active=active)
    )
    return reply


async def get_plan(stack: Stack) -> pm.PlanModeState:
    reply = await stack.plan.GetPlanMode(pm.GetPlanModeRequest(session_id=SID))
    state: pm.PlanModeState = reply.state
    return state


async def command(stack: Stack, args: str | None = None) -> rt.ExecuteCommandResponse:
    request = rt.ExecuteCommandRequest(session_id=SID, name="plan")
    if args is not None:
        request.args = args
    reply: rt.ExecuteCommandResponse = await stack.runtime.ExecuteCommand(request)
    return reply


async def events(stack: Stack) -> list[ev.Event]:
    return (await stack.log.read(SID, limit=1000)).events


def plan_events(log: list[ev.Event]) -> list[bool]:
    return [e.plan_mode.active for e in log if e.HasField("plan_mode")]


def headers(log: list[ev.Event]) -> list[ev.RequestHeader]:
    return [e.request_header for e in log if e.HasField("request_header")]


def shows_plan(header: ev.RequestHeader) -> bool:
    return any(section.id == PLAN_POLICY_SECTION_ID for section in header.sections)


def notices(log: list[ev.Event]) -> list[str]:
    return [
        e.user_message.text
        for e in log
        if e.HasField("user_message") and e.user_message.source.form == "notice"
    ]


def tool_results(log: list[ev.Event]) -> list[ev.ToolResult]:
    return [e.tool_result for e in log if e.HasField("tool_result")]


def state(active: bool, pending: bool | None = None) -> pm.PlanModeState:
    message = pm.PlanModeState(active=active)
    if pending is not None:
        message.pending = pending
    return message


async def started(reply: ScriptedReply) -> None:
    await asyncio.wait_for(reply.started.wait(), WAIT_S)


def call(name: str = "no_such_tool", **args: object) -> ScriptedToolCall:
    return ScriptedToolCall(name, dict(args))


async def answer(stack: Stack, question_id: str, **kind: bool | str) -> None:
    reply = ev.QuestionAnswer()
    for field, value in kind.items():
        setattr(reply, field, value)
    await stack.runtime.AnswerQuestion(
        rt.AnswerQuestionRequest(session_id=SID, question_id=question_id, answer=reply)
    )


# -- set outcomes ----------------------------------------------------------------


async def test_outcomes_while_a_turn_runs(stack: Stack, model: BuiltinAdapter) -> None:
    reply = model.enqueue(ScriptedReply(text="thinking", hold=True))
    await prompt(stack, "go")
    await started(reply)
    assert (await set_plan(stack, False)).outcome == pm.SET_OUTCOME_NOOP
    assert (await set_plan(stack, True)).outcome == pm.SET_OUTCOME_QUEUED
    assert (await set_plan(stack, True)).outcome == pm.SET_OUTCOME_NOOP
    assert await get_plan(stack) == state(False, pending=True)
    reply.release()
    await stack.wait_idle(SID)
    assert reply.outcome == "completed"


async def test_idle_commits_and_a_later_boundary_appends_nothing(stack: Stack) -> None:
    assert (await set_plan(stack, True)).outcome == pm.SET_OUTCOME_COMMITTED
    assert (await set_plan(stack, False)).outcome == pm.SET_OUTCOME_COMMITTED
    await prompt(stack, "go")
    await stack.wait_idle(SID)
    assert plan_events(await events(stack)) == [True, False]


async def test_queued_then_reverted_is_cancelled_and_records_no_switch(
    stack: Stack, model: BuiltinAdapter
) -> None:
    reply = model.enqueue(ScriptedReply(tool_calls=[call()], hold=True))
    await prompt(stack, "go")
    await started(reply)
    assert (await set_plan(stack, True)).outcome == pm.SET_OUTCOME_QUEUED
    reverted = await set_plan(stack, False)
    assert reverted.outcome == pm.SET_OUTCOME_CANCELLED
    assert reverted.state == state(False)
    assert await get_plan(stack) == state(False)
    reply.release()
    await stack.wait_idle(SID)
    log = await events(stack)
    assert plan_events(log) == [] and notices(log) == []
    assert not any(shows_plan(h) for h in headers(log))


async def test_plan_then_plan_off_during_a_turn_leaves_nothing(
    stack: Stack, model: BuiltinAdapter
) -> None:
    reply = model.enqueue(ScriptedReply(tool_calls=[call()], hold=True))
    await prompt(stack, "go")
    await started(reply)
    assert (await command(stack)).ok
    assert await get_plan(stack) == state(False, pending=True)
    assert (await command(stack, "off")).ok
    assert await get_plan(stack) == state(False)
    reply.release()
    await stack.wait_idle(SID)
    log = await events(stack)
    assert len(headers(log)) == 2, "the next boundary ran"
    assert plan_events(log) == []


# -- boundaries ------------------------------------------------------------------


async def test_a_choice_during_step_one_applies_before_step_two(
    stack: Stack, model: BuiltinAdapter
) -> None:
    first = model.enqueue(ScriptedReply(text="looking", tool_calls=[call()], hold=True))
    await prompt(stack, "go")
    await started(first)
    assert (await set_plan(stack, True)).outcome == pm.SET_OUTCOME_QUEUED
    first.release()
    await stack.wait_idle(SID)
    step_one, step_two = headers(await events(stack))
    assert not shows_plan(step_one) and shows_plan(step_two)
    assert first.outcome == "completed", "the running request was not cancelled"
    section = next(s for s in step_two.sections if s.id == PLAN_POLICY_SECTION_ID)
    assert section.order == 50 and "plan mode" in section.text
    assert await get_plan(stack) == state(True)


async def test_idle_choice_before_the_first_prompt_shapes_the_first_request(
    stack: Stack,
) -> None:
    await set_plan(stack, True)
    await prompt(stack, "plan it")
    await stack.wait_idle(SID)
    await set_plan(stack, False)
    await prompt(stack, "now do it")
    await stack.wait_idle(SID)
    in_plan, in_default = headers(await events(stack))
    assert shows_plan(in_plan) and not shows_plan(in_default)
    # The catalog never changes with the mode: byte-identical schemas.
    assert [t.SerializeToString() for t in in_plan.tools] == [
        t.SerializeToString() for t in in_default.tools
    ]
    assert {"exit_plan_mode", "read_file", "edit_file", "shell"} <= {t.name for t in in_plan.tools}


async def test_failing_append_at_the_boundary_runs_the_step_and_keeps_pending(
    stack: Stack, model: BuiltinAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    first = model.enqueue(ScriptedReply(tool_calls=[call()], hold=True))
    await prompt(stack, "go")
    await started(first)
    await set_plan(stack, True)
    assert stack.plan_log_outage is not None
    stack.plan_log_outage.on = True
    with caplog.at_level(logging.WARNING):
        first.release()
        await stack.wait_idle(SID)
    assert any(
        "not applied" in r.getMessage() or "boundary" in r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING
    )
    assert [shows_plan(h) for h in headers(await events(stack))] == [False, False]
    assert await get_plan(stack) == state(False, pending=True)

    stack.plan_log_outage.on = False
    await prompt(stack, "again")
    await stack.wait_idle(SID)
    assert [shows_plan(h) for h in headers(await events(stack))] == [False, False, True]
    assert await get_plan(stack) == state(True)


# -- notices ---------------------------------------------------------------------


async def test_no_notice_before_the_first_request(stack: Stack) -> None:
    await set_plan(stack, True)
    await prompt(stack, "go")
    await stack.wait_idle(SID)
    assert notices(await events(stack)) == []


async def test_exactly_one_notice_across_two_boundaries(
    stack: Stack, model: BuiltinAdapter
) -> None:
    await prompt(stack, "first turn")
    await stack.wait_idle(SID)
    first = model.enqueue(ScriptedReply(tool_calls=[call()], hold=True))
    model.enqueue(ScriptedReply(tool_calls=[call()]))
    await prompt(stack, "second turn")
    await started(first)
    await set_plan(stack, True)
    first.release()
    await stack.wait_idle(SID)
    log = await events(stack)
    assert len(headers(log)) == 4
    assert notices(log) == ["The user switched this session to plan mode."]
    notice = next(
        e for e in log if e.HasField("user_message") and e.user_message.source.form == "notice"
    )
    assert notice.user_message.source.kind == ev.SOURCE_KIND_PLUGIN


async def test_a_switch_left_pending_by_a_turn_reaches_the_model_before_the_next_prompt(
    stack: Stack, model: BuiltinAdapter
) -> None:
    await prompt(stack, "first turn")
    await stack.wait_idle(SID)
    # A one-step turn: the selection made during it meets no boundary there.
    held = model.enqueue(ScriptedReply(text="answering", hold=True))
    await prompt(stack, "second turn")
    await started(held)
    await set_plan(stack, True)
    held.release()
    await stack.wait_idle(SID)
    assert (await get_plan(stack)) == state(False, pending=True)
    await prompt(stack, "third turn")
    await stack.wait_idle(SID)
    log = await events(stack)
    users = [e.user_message.text for e in log if e.HasField("user_message")]
    notice = "The user switched this session to plan mode."
    assert users[-2:] == [notice, "third turn"]
    # The model sees the notice before the prompt, and answers the prompt.
    seen = [getattr(m, "text", "") for m in model.requests[-1].messages]
    assert seen[-2:] == [notice, "third turn"]
    assert shows_plan(headers(log)[-1])


async def test_no_notice_when_the_exit_tool_changes_the_mode(
    stack: Stack, model: BuiltinAdapter
) -> None:
    await set_plan(stack, True)
    model.enqueue(ScriptedReply(tool_calls=[call("exit_plan_mode", plan=PLAN)]))
    await prompt(stack, "plan")
    question = await stack.next_question(SID)
    await answer(stack, question.question_id, approve=True)
    await stack.wait_idle(SID)
    log = await events(stack)
    assert [shows_plan(h) for h in headers(log)] == [True, False]
    assert plan_events(log) == [True, False]
    assert notices(log) == []


# -- /plan -----------------------------------------------------------------------


async def test_plan_with_a_message_enters_plan_mode_and_sends_it(stack: Stack) -> None:
    result = await command(stack, "hello")
    assert result.ok and result.message
    await stack.wait_idle(SID)
    log = await events(stack)
    users = [e.user_message.text for e in log if e.HasField("user_message")]
    assert users == ["hello"]
    assert shows_plan(headers(log)[0])
    assert await get_plan(stack) == state(True)
    runs = [e.command_run for e in log if e.HasField("command_run")]
    dones = [e.command_done for e in log if e.HasField("command_done")]
    assert [r.name for r in runs] == ["plan"] and dones[0].kind == ev.COMMAND_DONE_KIND_SUCCESS


async def test_plan_off_with_extra_text_is_an_error_that_changes_nothing(stack: Stack) -> None:
    await command(stack)
    assert await get_plan(stack) == state(True)
    result = await command(stack, "off now")
    assert not result.ok and result.message
    assert await get_plan(stack) == state(True)
    dones = [e.command_done for e in await events(stack) if e.HasField("command_done")]
    assert dones[-1].kind == ev.COMMAND_DONE_KIND_ERROR


async def test_commands_list_offers_the_runtimes_and_the_capabilities_commands(
    stack: Stack,
) -> None:
    reply = await stack.runtime.ListCommands(rt.ListCommandsRequest(session_id=SID))
    names = [c.name for c in reply.commands]
    # The core's first, then the capabilities'.
    assert names[:3] == ["plan", "compact", "permissions"]
    assert {"context", "skills", "commands", "undo", "redo", "rewind", "agents"} <= set(names)


# -- exit_plan_mode --------------------------------------------------------------


async def run_exit(
    stack: Stack, model: BuiltinAdapter, plan: str = PLAN, **answer_kind: bool | str
) -> ev.ToolResult:
    model.enqueue(ScriptedReply(tool_calls=[call("exit_plan_mode", plan=plan)]))
    await prompt(stack, "present the plan")
    if answer_kind:
        question = await stack.next_question(SID)
        assert question.presentation == "plan-review"
        assert question.approve_label == "Approve" and question.body == plan
        await answer(stack, question.question_id, **answer_kind)
    await stack.wait_idle(SID)
    return tool_results(await events(stack))[-1]


async def test_exit_outside_plan_mode_fails(stack: Stack, model: BuiltinAdapter) -> None:
    result = await run_exit(stack, model)
    assert not result.ok and result.error == NOT_IN_PLAN_MODE


async def test_exit_approved_leaves_plan_mode(stack: Stack, model: BuiltinAdapter) -> None:
    await set_plan(stack, True)
    result = await run_exit(stack, model, approve=True)
    assert result.ok and json.loads(result.output) == {"approved": True}
    assert await get_plan(stack) == state(False)


async def test_exit_with_feedback_keeps_planning(stack: Stack, model: BuiltinAdapter) -> None:
    await set_plan(stack, True)
    result = await run_exit(stack, model, feedback="Cover the tests too.")
    assert not result.ok and "Cover the tests too." in result.error
    assert await get_plan(stack) == state(True)


async def test_exit_dismissed_tells_the_model_to_stay(stack: Stack, model: BuiltinAdapter) -> None:
    await set_plan(stack, True)
    result = await run_exit(stack, model, dismiss=True)
    assert not result.ok and result.error == DISMISSED
    assert await get_plan(stack) == state(True)


async def test_exit_with_a_malformed_answer_is_not_approved(
    stack: Stack, model: BuiltinAdapter
) -> None:
    await set_plan(stack, True)
    result = await run_exit(stack, model, approve=False)
    assert not result.ok and result.error == NOT_UNDERSTOOD
    assert await get_plan(stack) == state(True)


async def test_exit_with_a_plan_that_is_not_markdown_fails(
    stack: Stack, model: BuiltinAdapter
) -> None:
    await set_plan(stack, True)
    result = await run_exit(stack, model, plan="just do it")
    assert not result.ok and result.error == NOT_A_PLAN


async def test_questions_are_listed_and_answered_once(stack: Stack, model: BuiltinAdapter) -> None:
    await set_plan(stack, True)
    model.enqueue(ScriptedReply(tool_calls=[call("exit_plan_mode", plan=PLAN)]))
    await prompt(stack, "present the plan")
    question = await stack.next_question(SID)
    open_now = fold_events(SessionState(), await events(stack)).questions.open
    assert [q.question_id for q in open_now] == [question.question_id]
    error = await expect_rpc_error(
        stack.runtime.AnswerQuestion(
            rt.AnswerQuestionRequest(
                session_id=SID, question_id="q-unknown", answer=ev.QuestionAnswer(approve=True)
            )
        ),
        grpc.StatusCode.NOT_FOUND,
    )
    assert reason_of(error) == "QUESTION_NOT_FOUND"
    await answer(stack, question.question_id, dismiss=True)
    error = await expect_rpc_error(
        stack.runtime.AnswerQuestion(
            rt.AnswerQuestionRequest(
                session_id=SID,
                question_id=question.question_id,
                answer=ev.QuestionAnswer(approve=True),
            )
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert reason_of(error) == "QUESTION_ANSWERED"
    await stack.wait_idle(SID)
    assert await get_plan(stack) == state(True), "the duplicate answer did not approve"


# -- durability, fork, resume, cancel ----------------------------------------------


async def test_a_queued_selection_survives_a_plan_mode_restart(
    stack: Stack, model: BuiltinAdapter
) -> None:
    first = model.enqueue(ScriptedReply(tool_calls=[call()], hold=True))
    await prompt(stack, "go")
    await started(first)
    await set_plan(stack, True)
    await stack.restart("planmode")
    assert await get_plan(stack) == state(False, pending=True)
    first.release()
    await stack.wait_idle(SID)
    assert [shows_plan(h) for h in headers(await events(stack))] == [False, True]


async def test_while_plan_mode_is_down_steps_show_the_plan_mode_committed_in_the_log(
    stack: Stack, model: BuiltinAdapter
) -> None:
    await set_plan(stack, True)
    await stack.embedded.stop_service("planmode")
    await prompt(stack, "go")
    await stack.wait_idle(SID)
    (header,) = headers(await events(stack))
    assert [s.text for s in header.sections if s.id == PLAN_POLICY_SECTION_ID] == [DEFAULT_SECTION]
    assert list(model.requests[-1].sections) == list(header.sections)


async def test_a_starting_runtime_ends_the_turn_a_stopped_one_left_open_unasked(
    stack: Stack, model: BuiltinAdapter
) -> None:
    first = model.enqueue(ScriptedReply(text="long", hold=True))
    await prompt(stack, "go")
    await started(first)
    await stack.embedded.stop_service("agentruntime")  # records nothing of its turn
    assert (await stack.log.get_session(SID)).running
    after = (await stack.log.get_session(SID)).last_seq
    await stack.embedded.start_service("agentruntime")
    # No client asks about the session: the runtime recovers it on its own.
    async with asyncio.timeout(WAIT_S):
        async for item in stack.log.subscribe(SID, after_seq=after):
            if isinstance(item, ev.Event) and item.HasField("turn_end"):
                assert item.turn_end.reason == ev.TURN_END_REASON_INTERRUPTED
                break
    assert not (await stack.log.get_session(SID)).running


async def test_a_queued_selection_survives_a_runtime_restart(
    stack: Stack, model: BuiltinAdapter
) -> None:
    first = model.enqueue(ScriptedReply(tool_calls=[call()], hold=True))
    await prompt(stack, "go")
    await started(first)
    await set_plan(stack, True)
    await stack.restart("agentruntime")
    assert await get_plan(stack) == state(False, pending=True)
    await prompt(stack, "after the restart")
    await stack.wait_idle(SID)
    log = await events(stack)
    assert [shows_plan(h) for h in headers(log)] == [False, True]
    ends = [e.turn_end.reason for e in log if e.HasField("turn_end")]
    assert ends == [ev.TURN_END_REASON_INTERRUPTED, ev.TURN_END_REASON_COMPLETED]


async def test_a_review_survives_a_runtime_restart_and_its_turn_goes_on(
    stack: Stack, model: BuiltinAdapter
) -> None:
    await set_plan(stack, True)
    model.enqueue(ScriptedReply(tool_calls=[call("exit_plan_mode", plan=PLAN)]))
    model.enqueue(ScriptedReply(text="Implementing it."))
    await prompt(stack, "present the plan")
    question = await stack.next_question(SID)
    await stack.restart("agentruntime")
    # The restarted runtime offers the same question, and the turn waits for it.
    await answer(stack, question.question_id, approve=True)
    await stack.wait_idle(SID)
    log = await events(stack)
    assert [r.ok for r in tool_results(log)] == [True]
    assert [e.assistant_message.text for e in log if e.HasField("assistant_message")] == [
        "Implementing it."
    ]
    assert [e.turn_end.reason for e in log if e.HasField("turn_end")] == [
        ev.TURN_END_REASON_COMPLETED
    ]
    assert await get_plan(stack) == state(False)


async def test_fork_inherits_the_state_new_sessions_start_inactive_resume_restores(
    stack: Stack,
) -> None:
    await set_plan(stack, True)
    fork = await stack.log.fork(SID, new_session_id="forked")
    forked = await stack.plan.GetPlanMode(pm.GetPlanModeRequest(session_id=fork.id))
    assert forked.state == state(True)
    await stack.log.create_session("fresh", "/work/project")
    fresh = await stack.plan.GetPlanMode(pm.GetPlanModeRequest(session_id="fresh"))
    assert fresh.state == state(False)
    await stack.restart("planmode")
    assert await get_plan(stack) == state(True)


async def test_cancel_keeps_a_queued_selection_for_the_next_prompt(
    stack: Stack, model: BuiltinAdapter
) -> None:
    first = model.enqueue(ScriptedReply(text="long", hold=True))
    await prompt(stack, "go")
    await started(first)
    await set_plan(stack, True)
    cancelled = await stack.runtime.Cancel(rt.CancelRequest(session_id=SID))
    assert cancelled.cancelled
    await stack.wait_idle(SID)
    assert await get_plan(stack) == state(False, pending=True)
    await prompt(stack, "next")
    await stack.wait_idle(SID)
    assert [shows_plan(h) for h in headers(await events(stack))] == [False, True]


async def test_unknown_session_is_not_found_everywhere(stack: Stack) -> None:
    for call_ in (
        stack.runtime.Prompt(rt.PromptRequest(session_id="nope", text="hi")),
        stack.plan.GetPlanMode(pm.GetPlanModeRequest(session_id="nope")),
        stack.plan.SetPlanMode(pm.SetPlanModeRequest(session_id="nope", active=True)),
    ):
        error = await expect_rpc_error(call_, grpc.StatusCode.NOT_FOUND)
        assert reason_of(error) == "SESSION_NOT_FOUND"


async def test_send_while_running_is_agent_busy(stack: Stack, model: BuiltinAdapter) -> None:
    reply = model.enqueue(ScriptedReply(text="busy", hold=True))
    await prompt(stack, "go")
    await started(reply)
    error = await expect_rpc_error(prompt(stack, "again"), grpc.StatusCode.FAILED_PRECONDITION)
    assert reason_of(error) == "AGENT_BUSY"
    queued = await prompt(stack, "later", rt.PROMPT_MODE_QUEUE)
    assert queued.mode == rt.PROMPT_MODE_QUEUE and queued.status.running
    reply.release()
    await stack.wait_idle(SID)


async def test_a_choice_made_during_a_retry_waits_for_the_next_step(
    stack: Stack, model: BuiltinAdapter
) -> None:
    failing = model.enqueue(
        ScriptedReply(error=ModelError("503", retryable=True, status=503), hold=True)
    )
    model.enqueue(ScriptedReply(text="second attempt"))
    await prompt(stack, "go")
    await started(failing)
    assert (await set_plan(stack, True)).outcome == pm.SET_OUTCOME_QUEUED
    failing.release()
    await stack.wait_idle(SID)
    log = await events(stack)
    assert len(headers(log)) == 1 and not shows_plan(headers(log)[0])
    assert model.requests[0] == model.requests[1], "the retry reused the assembled request"
    assert await get_plan(stack) == state(False, pending=True)
