"""Idle agents are unloaded (their lease released, their state dropped from
memory) and come back from the log on the next call with nothing lost;
agents with something to go on with stay. Over the real SQLite session log,
with an idle time of a few hundredths of a second."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import Question
from services.agentruntime.models.base import AssistantMessage, UserMessage
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply, ScriptedToolCall
from services.agentruntime.plan_port import EmbeddedPlanMode
from services.agentruntime.ports import PlanCommandOutcome
from services.agentruntime.runtime import AgentRuntime, idle_s_from_env
from services.common.errors import InvalidRequest
from services.planmode.controller import PlanModeController
from services.sessionlog.domain import SessionLog

WAIT_S = 10.0
IDLE_S = 0.05
LEASE_S = 10.0


class Unloads:
    """Which sessions the runtime unloaded, to wait on."""

    def __init__(self) -> None:
        self.sessions: list[str] = []
        self._changed = asyncio.Event()

    def __call__(self, session_id: str) -> None:
        self.sessions.append(session_id)
        self._changed.set()

    async def of(self, session_id: str) -> None:
        async with asyncio.timeout(WAIT_S):
            while session_id not in self.sessions:
                self._changed.clear()
                await self._changed.wait()


@pytest.fixture
async def sessions(session_log: SessionLog, tmp_path: Path) -> AsyncIterator[SessionLog]:
    for session_id in ("idle", "busy", "waiting"):
        await session_log.create_session(session_id, str(tmp_path))
    yield session_log


async def idle(runtime: AgentRuntime, session_id: str) -> None:
    async with asyncio.timeout(WAIT_S):
        async for status in runtime.watch_status(session_id):
            if not status.running:
                return


async def next_question(log: SessionLog, session_id: str) -> Question:
    async with asyncio.timeout(WAIT_S):
        async for item in log.subscribe(session_id):
            if isinstance(item, ev.Event) and item.HasField("question_asked"):
                return Question.from_event(item.question_asked)
    raise AssertionError("no question")


async def test_an_idle_agent_is_unloaded_and_the_next_prompt_resumes_it(
    sessions: SessionLog,
) -> None:
    log, unloads, model = sessions, Unloads(), BuiltinAdapter()
    runtime = AgentRuntime(log, model, lease_s=LEASE_S, idle_s=IDLE_S, on_unload=unloads)
    try:
        await runtime.prompt("idle", "first")
        await idle(runtime, "idle")
        await unloads.of("idle")

        # Its lease was given up: another replica may take the session at once.
        assert runtime.leases.token("idle") is None
        taken = await log.acquire_lease("idle", "elsewhere", LEASE_S)
        assert taken.owner == "elsewhere"
        assert await log.release_lease("idle", "elsewhere", taken.token)

        await runtime.prompt("idle", "second")
        await idle(runtime, "idle")
        # The reloaded agent knew the whole conversation.
        assert model.requests[-1].messages == (
            UserMessage("first"),
            AssistantMessage("Echo: first"),
            UserMessage("second"),
        )
        events = (await log.read("idle")).events
        assert [e.assistant_message.text for e in events if e.HasField("assistant_message")] == [
            "Echo: first",
            "Echo: second",
        ]
        assert [e.turn_end.reason for e in events if e.HasField("turn_end")] == [
            ev.TURN_END_REASON_COMPLETED,
            ev.TURN_END_REASON_COMPLETED,
        ]
    finally:
        await runtime.close()


async def test_running_and_waiting_agents_stay_loaded(sessions: SessionLog, tmp_path: Path) -> None:
    log, unloads = sessions, Unloads()
    write = ScriptedToolCall("write_file", {"path": "a.txt", "content": "hi\n"}, call_id="c1")
    held = ScriptedReply(text="held", hold=True)
    model = BuiltinAdapter([ScriptedReply(tool_calls=[write]), held])
    runtime = AgentRuntime(log, model, lease_s=LEASE_S, idle_s=IDLE_S, on_unload=unloads)
    try:
        await runtime.prompt("waiting", "write it")  # waits for its approval
        question = await next_question(log, "waiting")
        await runtime.prompt("busy", "take your time")  # its reply is held
        async with asyncio.timeout(WAIT_S):
            await held.started.wait()
        await runtime.prompt("idle", "hi")
        await idle(runtime, "idle")

        # Unloaded after the other two had been as long without a call.
        await unloads.of("idle")
        assert unloads.sessions == ["idle"]
        assert runtime.leases.token("busy") is not None
        assert runtime.leases.token("waiting") is not None

        # Both go on where they were.
        await runtime.answer("waiting", question.question_id, ev.QuestionAnswer(allow_once=True))
        await idle(runtime, "waiting")
        assert (tmp_path / "a.txt").read_text() == "hi\n"
        held.release()
        await idle(runtime, "busy")
        for session_id in ("busy", "waiting"):
            ends = [e for e in (await log.read(session_id)).events if e.HasField("turn_end")]
            assert [e.turn_end.reason for e in ends] == [ev.TURN_END_REASON_COMPLETED]
    finally:
        await runtime.close()


def test_the_idle_time_comes_from_the_environment() -> None:
    assert idle_s_from_env({}) == 300.0
    assert idle_s_from_env({"AGENTHOST_AGENT_IDLE_S": "30"}) == 30.0
    for bad in ("0", "-1", "soon", "100000"):
        with pytest.raises(InvalidRequest):
            idle_s_from_env({"AGENTHOST_AGENT_IDLE_S": bad})


class HeldPlanMode(EmbeddedPlanMode):
    """Plan mode whose /plan waits for `release` (a slow plan-mode service)."""

    def __init__(self, controller: PlanModeController) -> None:
        super().__init__(controller)
        self.started, self.release = asyncio.Event(), asyncio.Event()

    async def run_plan_command(self, session_id: str, args: str | None) -> PlanCommandOutcome:
        self.started.set()
        await self.release.wait()
        return await super().run_plan_command(session_id, args)


async def test_an_agent_running_a_command_is_not_unloaded_under_it(sessions: SessionLog) -> None:
    log, unloads = sessions, Unloads()
    plan = HeldPlanMode(PlanModeController(log))
    runtime = AgentRuntime(
        log, BuiltinAdapter(), plan=plan, lease_s=LEASE_S, idle_s=IDLE_S, on_unload=unloads
    )
    try:
        await runtime.prompt("busy", "hello")
        await idle(runtime, "busy")
        command = asyncio.ensure_future(runtime.execute_command("busy", "plan", "read the code"))
        async with asyncio.timeout(WAIT_S):
            await plan.started.wait()
        # Another agent, idle as long, is unloaded meanwhile: the check ran.
        await runtime.prompt("idle", "hi")
        await idle(runtime, "idle")
        await unloads.of("idle")
        assert "busy" not in unloads.sessions
        plan.release.set()
        async with asyncio.timeout(WAIT_S):
            result = await command
        assert result.ok
        await idle(runtime, "busy")
        events = (await log.read("busy")).events
        texts = [e.user_message.text for e in events if e.HasField("user_message")]
        assert "read the code" in texts  # steered by the agent that held its lease
        assert [e.turn_end.reason for e in events if e.HasField("turn_end")][-1] == (
            ev.TURN_END_REASON_COMPLETED
        )
    finally:
        await runtime.close()


async def test_an_agent_with_a_background_job_stays_loaded_until_the_job_ends(
    sessions: SessionLog,
) -> None:
    log, unloads = sessions, Unloads()
    start = ScriptedToolCall("shell", {"command": "sleep 60", "background": True}, call_id="c1")
    model = BuiltinAdapter([ScriptedReply(tool_calls=[start]), ScriptedReply(text="started")])
    runtime = AgentRuntime(log, model, lease_s=LEASE_S, idle_s=IDLE_S, on_unload=unloads)
    try:
        await runtime.update_settings("busy", None, "never")
        await runtime.prompt("busy", "start a long job")
        await idle(runtime, "busy")
        await runtime.prompt("idle", "hi")
        await idle(runtime, "idle")
        await unloads.of("idle")  # the check ran: the job's session stayed
        assert "busy" not in unloads.sessions and runtime.leases.token("busy") is not None

        stopped = await runtime.execute_command("busy", "jobs", "kill job-1")
        assert stopped.ok, stopped.message
        await unloads.of("busy")
        ends = [e.job_ended for e in (await log.read("busy")).events if e.HasField("job_ended")]
        assert [(e.job_id, e.reason) for e in ends] == [("job-1", ev.JOB_END_REASON_KILLED)]
    finally:
        await runtime.close()
