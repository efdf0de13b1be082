"""Turns and steps of the agent runtime over the real SQLite session log."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import Question
from services.agentruntime.agent import INTERRUPTED, AgentBusy, AgentStatus, PromptMode
from services.agentruntime.models.base import ModelError
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply, ScriptedToolCall
from services.agentruntime.questions import AnswerMismatch, QuestionAnswered, QuestionNotFound
from services.agentruntime.runtime import AgentRuntime
from services.agentruntime.transcript import ENDED_EARLY_MARK
from services.common.errors import SessionNotFound
from services.sessionlog.domain import SessionLog
from services.sessionlog.port import AppendResult, Event, SessionLogPort
from tests.support.events import kinds

WAIT_S = 10.0


async def idle(runtime: AgentRuntime, session_id: str) -> None:
    """Wait on the status stream until the session's agent reports idle."""
    async with asyncio.timeout(WAIT_S):
        async for status in runtime.watch_status(session_id):
            if not status.running:
                return


async def log_kinds(log: SessionLog, session_id: str) -> list[str]:
    return kinds((await log.read(session_id, limit=1000)).events)


async def test_a_turn_records_the_whole_step(session_log: SessionLog, session: str) -> None:
    runtime = AgentRuntime(session_log, BuiltinAdapter())
    taken, status = await runtime.prompt(session, "hello")
    assert taken is PromptMode.SEND and status.running
    await idle(runtime, session)
    # The prompt is accepted once turn/start and its message are logged.
    assert await log_kinds(session_log, session) == [
        "turn_start",
        "user_message",
        "session_title",  # named after its first message
        "step_start",
        "request_header",
        "assistant_message",
        "model_usage",  # what the request used, before its calls run
        "step_end",
        "turn_end",
    ]
    events = (await session_log.read(session, limit=100)).events
    assert events[2].session_title.title == "hello"
    header = events[4].request_header
    assert header.sections[0].id == "agenthost:base"
    assert events[5].assistant_message.text == "Echo: hello"
    assert events[-1].turn_end.reason == 1  # completed


async def test_send_while_running_is_busy_queue_runs_after_steer_joins(
    session_log: SessionLog, session: str
) -> None:
    model = BuiltinAdapter()
    first = model.enqueue(ScriptedReply(text="working", hold=True))
    runtime = AgentRuntime(session_log, model)
    await runtime.prompt(session, "first")
    await asyncio.wait_for(first.started.wait(), WAIT_S)
    with pytest.raises(AgentBusy) as busy:
        await runtime.prompt(session, "rejected")
    assert busy.value.reason == "AGENT_BUSY"
    assert (await runtime.prompt(session, "later", PromptMode.QUEUE))[0] is PromptMode.QUEUE
    assert (await runtime.prompt(session, "also now", PromptMode.STEER))[0] is PromptMode.STEER
    first.release()
    await idle(runtime, session)
    events = (await session_log.read(session, limit=1000)).events
    users = [e.user_message.text for e in events if e.HasField("user_message")]
    assert users == ["first", "also now", "later"]
    assert "rejected" not in users
    assert kinds(events).count("turn_start") == 2
    # The steered text joined a second step of the first turn.
    first_turn = kinds(events)[: kinds(events).index("turn_end")]
    assert first_turn.count("step_start") == 2


async def test_cancel_records_a_cancelled_turn_and_stops_the_request(
    session_log: SessionLog, session: str
) -> None:
    model = BuiltinAdapter()
    reply = model.enqueue(ScriptedReply(text="long answer", hold=True))
    runtime = AgentRuntime(session_log, model)
    await runtime.prompt(session, "go")
    await asyncio.wait_for(reply.started.wait(), WAIT_S)
    cancelled, _ = await runtime.cancel(session)
    assert cancelled
    await asyncio.wait_for(reply.ended.wait(), WAIT_S)
    assert reply.outcome == "cancelled"
    events = (await session_log.read(session, limit=100)).events
    assert events[-1].turn_end.reason == 2  # cancelled
    # What the user saw stream is recorded, just before the cancelled end.
    assert events[-2].assistant_message.text == "long answer"
    assert (await runtime.cancel(session))[0] is False


async def test_model_error_ends_the_turn_with_a_recorded_error(
    session_log: SessionLog, session: str
) -> None:
    model = BuiltinAdapter(
        [ScriptedReply(error=ModelError("HTTP 400: bad model", retryable=False, status=400))]
    )
    runtime = AgentRuntime(session_log, model)
    await runtime.prompt(session, "go")
    await idle(runtime, session)
    last = (await session_log.read(session, limit=100)).events[-1]
    assert last.turn_end.reason == 3 and "bad model" in last.turn_end.error
    await runtime.prompt(session, "again")
    await idle(runtime, session)
    assert (await log_kinds(session_log, session)).count("turn_end") == 2


async def test_a_retryable_failure_retries_the_same_request(
    session_log: SessionLog, session: str
) -> None:
    model = BuiltinAdapter(
        [
            ScriptedReply(error=ModelError("503", retryable=True, status=503)),
            ScriptedReply(text="second try"),
        ]
    )
    runtime = AgentRuntime(session_log, model)
    await runtime.prompt(session, "go")
    await idle(runtime, session)
    assert model.requests[0] == model.requests[1]
    assert (await log_kinds(session_log, session)).count("request_header") == 1


async def test_tool_calls_owe_another_step(session_log: SessionLog, session: str) -> None:
    model = BuiltinAdapter(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("no_such_tool", call_id="c1")]),
            ScriptedReply(text="done"),
        ]
    )
    runtime = AgentRuntime(session_log, model)
    await runtime.prompt(session, "use a tool")
    await idle(runtime, session)
    events = (await session_log.read(session, limit=100)).events
    result = next(e.tool_result for e in events if e.HasField("tool_result"))
    assert not result.ok and "unknown tool" in result.error
    assert kinds(events).count("step_start") == 2
    assert getattr(model.requests[1].messages[-1], "call_id", None) == "c1"


async def test_resume_closes_a_turn_left_open_and_restores_the_conversation(
    session_log: SessionLog, session: str
) -> None:
    from tests.support.events import turn_start, user

    await session_log.append(session, [turn_start(), user("before the crash")])
    model = BuiltinAdapter()
    runtime = AgentRuntime(session_log, model)
    await runtime.resume(session)
    last = (await session_log.read(session, limit=100)).events[-1]
    assert last.turn_end.error == INTERRUPTED
    await runtime.prompt(session, "after")
    await idle(runtime, session)
    texts = [getattr(m, "text", "") for m in model.requests[0].messages]
    # The model hears that the turn ended unanswered, not two prompts in a row.
    assert texts == ["before the crash", ENDED_EARLY_MARK.format(reason=INTERRUPTED), "after"]


class LostFirstAnswers:
    """The session log as a runtime sees it through a restart of the log: the
    first send of each batch is written but its answer is lost, so the batch
    is sent again and answered as a duplicate."""

    def __init__(self, log: SessionLog) -> None:
        self._log = log

    def __getattr__(self, name: str) -> object:
        return getattr(self._log, name)

    async def append(
        self,
        session_id: str,
        events: Sequence[Event],
        expected_last_seq: int | None = None,
        *,
        lease_token: int | None = None,
    ) -> AppendResult:
        await self._log.append(session_id, events, expected_last_seq, lease_token=lease_token)
        return await self._log.append(session_id, events, lease_token=lease_token)


async def test_a_prompt_whose_append_answer_was_lost_still_runs(
    session_log: SessionLog, session: str
) -> None:
    runtime = AgentRuntime(cast(SessionLogPort, LostFirstAnswers(session_log)), BuiltinAdapter())
    await runtime.prompt(session, "hello")
    await idle(runtime, session)
    events = (await session_log.read(session, limit=100)).events
    assert kinds(events)[-1] == "turn_end"
    assert events[-1].turn_end.reason == ev.TURN_END_REASON_COMPLETED


class HeldAfterWriting:
    """The session log with a switch: while `holding`, an append is written,
    then its answer waits for `release` (a caller may give up meanwhile)."""

    def __init__(self, log: SessionLog) -> None:
        self._log = log
        self.holding = False
        self.written = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> object:
        return getattr(self._log, name)

    async def append(
        self,
        session_id: str,
        events: Sequence[Event],
        expected_last_seq: int | None = None,
        *,
        lease_token: int | None = None,
    ) -> AppendResult:
        result = await self._log.append(
            session_id, events, expected_last_seq, lease_token=lease_token
        )
        if self.holding:
            self.written.set()
            await self.release.wait()
        return result


async def turn_end(log: SessionLog, session_id: str) -> ev.TurnEnd:
    """The next turn/end in the log, followed live."""
    async with asyncio.timeout(WAIT_S):
        async for item in log.subscribe(session_id):
            if isinstance(item, Event) and item.HasField("turn_end"):
                return item.turn_end
    raise AssertionError("the subscription ended")


async def test_a_prompt_whose_caller_went_away_mid_admission_still_runs(
    session_log: SessionLog, session: str
) -> None:
    held = HeldAfterWriting(session_log)
    runtime = AgentRuntime(cast(SessionLogPort, held), BuiltinAdapter())
    await runtime.resume(session)
    held.holding = True
    prompt = asyncio.create_task(runtime.prompt(session, "hello"))
    await asyncio.wait_for(held.written.wait(), WAIT_S)
    prompt.cancel()  # its gateway died, say, with turn/start written
    held.holding = False
    held.release.set()
    assert (await turn_end(session_log, session)).reason == ev.TURN_END_REASON_COMPLETED


async def test_a_retried_input_whose_turn_ran_runs_no_second_turn(
    session_log: SessionLog, session: str
) -> None:
    runtime = AgentRuntime(session_log, BuiltinAdapter())
    await runtime.prompt(session, "once", input_id="input-1")
    await idle(runtime, session)
    before = await log_kinds(session_log, session)
    await runtime.prompt(session, "once", input_id="input-1")
    await idle(runtime, session)
    assert await log_kinds(session_log, session) == before


async def test_concurrent_resumes_share_one_agent(session_log: SessionLog, session: str) -> None:
    runtime = AgentRuntime(session_log, BuiltinAdapter())
    agents = await asyncio.gather(*(runtime.resume(session) for _ in range(10)))
    assert all(agent is agents[0] for agent in agents)


async def test_unknown_session_is_not_found(session_log: SessionLog) -> None:
    runtime = AgentRuntime(session_log, BuiltinAdapter())
    with pytest.raises(SessionNotFound):
        await runtime.prompt("missing", "hi")


async def test_status_stream_reports_running_then_idle(
    session_log: SessionLog, session: str
) -> None:
    runtime = AgentRuntime(session_log, BuiltinAdapter())
    seen: list[AgentStatus] = []

    async def watch() -> None:
        async for status in runtime.watch_status(None):
            seen.append(status)
            if not status.running:
                return

    watcher = asyncio.create_task(watch())
    await runtime.resume(session)
    await runtime.prompt(session, "hi")
    await asyncio.wait_for(watcher, WAIT_S)
    assert [s.running for s in seen] == [True, False]


async def test_an_approval_is_answered_once_with_an_answer_that_fits(
    session_log: SessionLog, session: str, tmp_path: Path
) -> None:
    write = ScriptedToolCall("write_file", {"path": "a.txt", "content": "hi\n"}, call_id="c1")
    runtime = AgentRuntime(session_log, BuiltinAdapter([ScriptedReply(tool_calls=[write])]))
    await runtime.prompt(session, "write it")
    question = await next_question(session_log, session)
    assert question.presentation == "tool-approval" and question.call_id == "c1"
    with pytest.raises(QuestionNotFound):
        await runtime.answer(session, "q-unknown", ev.QuestionAnswer(allow_once=True))
    with pytest.raises(AnswerMismatch):
        await runtime.answer(session, question.question_id, ev.QuestionAnswer(approve=True))
    await runtime.answer(session, question.question_id, ev.QuestionAnswer(allow_once=True))
    with pytest.raises(QuestionAnswered):
        await runtime.answer(session, question.question_id, ev.QuestionAnswer(deny="no"))
    await idle(runtime, session)
    assert (tmp_path / "a.txt").read_text() == "hi\n"


async def next_question(log: SessionLog, session_id: str) -> Question:
    async with asyncio.timeout(WAIT_S):
        async for item in log.subscribe(session_id):
            if isinstance(item, ev.Event) and item.HasField("question_asked"):
                return Question.from_event(item.question_asked)
    raise AssertionError("no question")


async def test_an_edit_approval_shows_the_change_in_its_file_with_context(
    session_log: SessionLog, session: str, tmp_path: Path
) -> None:
    source = "".join(f"line {n}\n" for n in range(1, 11))
    (tmp_path / "app.py").write_text(source)
    edit = ScriptedToolCall(
        "edit_file", {"path": "app.py", "old_string": "line 5", "new_string": "    five"}
    )
    new = ScriptedToolCall("write_file", {"path": "new.py", "content": "x = 1\n" * 100})
    model = BuiltinAdapter([ScriptedReply(tool_calls=[edit]), ScriptedReply(tool_calls=[new])])
    runtime = AgentRuntime(session_log, model)
    await runtime.prompt(session, "edit it")
    question = await next_question(session_log, session)
    # Three lines of context either side, the true line numbers, the indentation.
    assert question.body.splitlines() == [
        "--- a/app.py",
        "+++ b/app.py",
        "@@ -2,7 +2,7 @@",
        *(f" line {n}" for n in (2, 3, 4)),
        "-line 5",
        "+    five",
        *(f" line {n}" for n in (6, 7, 8)),
    ]
    await runtime.answer(session, question.question_id, ev.QuestionAnswer(allow_once=True))
    # A new file: its first lines.
    asked = await next_questions(session_log, session, 2)
    body = asked[-1].body.splitlines()
    assert body[:3] == ["--- /dev/null", "+++ b/new.py", "@@ -0,0 +1,100 @@"]
    assert body[3:5] == ["+x = 1", "+x = 1"] and body[-1] == "… 60 more lines"
    assert not (tmp_path / "new.py").exists()


async def next_questions(log: SessionLog, session_id: str, count: int) -> list[Question]:
    asked: list[Question] = []
    async with asyncio.timeout(WAIT_S):
        async for item in log.subscribe(session_id):
            if isinstance(item, ev.Event) and item.HasField("question_asked"):
                asked.append(Question.from_event(item.question_asked))
                if len(asked) == count:
                    return asked
    raise AssertionError("too few questions")
