"""The gateway's workflows as plain Python, without a server: the summaries
a session list is made of (read from the real SQLite session log), whether
a session shows as running when it opens, and a prompt's plan target
(plan mode answered in-process by its real servicer and controller)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev
from google.protobuf import json_format, struct_pb2

from agenthost_core.plan import PlanState
from services.agentruntime.agent import AgentBusy
from services.agentruntime.models.builtin import BuiltinAdapter
from services.agentruntime.runtime import AgentRuntime
from services.gateway import listing
from services.gateway.hub import Connection, Frame
from services.gateway.kept_plans import KeptPlans
from services.gateway.opening import running_of
from services.gateway.plan_choices import PlanChoices
from services.gateway.stream import StreamFrames
from services.planmode.controller import PlanModeController
from services.planmode.servicer import PlanModeServicer
from services.projection.client import Block
from services.sessionlog.domain import SessionLog


def user(text: str) -> ev.Event:
    return ev.Event(user_message=ev.UserMessage(text=text))


async def test_a_list_reads_durable_sessions_by_pages_and_lazy_ones_alone(
    session_log: SessionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listing, "LIST_CHUNK", 2)  # several pages of ids, each paged
    for name in ("a", "b", "c", "lazy"):
        await session_log.create_session(name, "/w")
    for name in ("a", "b", "c"):
        await session_log.append(name, [user(f"hi {name}")])
    found = await listing.summaries(session_log, ["a", "b", "c", "lazy", "gone"])
    assert sorted(s.id for s in found) == ["a", "b", "c", "lazy"]
    assert {s.id: s.blank for s in found}["lazy"] is True


def status_block(running: bool | None) -> Block:
    values = {}
    if running is not None:
        values["status"] = json_format.ParseDict({"running": running}, struct_pb2.Value())
    return Block(7, values)


@pytest.mark.parametrize(
    ("agent", "block", "shown"),
    [
        (None, None, False),  # nothing known: not running
        (rt.AgentStatus(running=True), None, True),  # the agent says so
        (rt.AgentStatus(running=True), status_block(False), False),  # the block's seq wins
        (None, status_block(True), True),
        (rt.AgentStatus(running=False), status_block(None), False),  # no status unit
    ],
)
def test_an_opened_session_runs_as_the_status_value_says_else_as_the_agent_says(
    agent: rt.AgentStatus | None, block: Block | None, shown: bool
) -> None:
    assert running_of(agent, block) is shown


class InProcessPlanMode:
    """Plan mode as the gateway calls it, answered by the real servicer over
    the real controller and session log, in this process (no server)."""

    def __init__(self, log: SessionLog) -> None:
        self.servicer = PlanModeServicer(PlanModeController(log))

    async def get(self, session_id: str) -> pm.GetPlanModeResponse:
        request = pm.GetPlanModeRequest(session_id=session_id)
        return await self.servicer.GetPlanMode(request, cast(Any, None))

    async def set(
        self, session_id: str, active: bool, *, when_idle: bool = False
    ) -> pm.SetPlanModeResponse:
        request = pm.SetPlanModeRequest(session_id=session_id, active=active, when_idle=when_idle)
        return await self.servicer.SetPlanMode(request, cast(Any, None))


class Unused:
    """A peer the workflow must not call."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} was called")


def plan_choices(log: SessionLog) -> tuple[PlanChoices, InProcessPlanMode]:
    plan = InProcessPlanMode(log)
    return PlanChoices(plan, KeptPlans(), Unused(), Unused()), plan


async def plan_of(plan: InProcessPlanMode, session_id: str) -> PlanState:
    return PlanState.from_proto((await plan.get(session_id)).state)


async def test_a_prompts_plan_target_is_chosen_before_it_is_sent(session_log: SessionLog) -> None:
    await session_log.create_session("s", "/w")
    choices, plan = plan_choices(session_log)

    async def send() -> PlanState:
        return await plan_of(plan, "s")  # what the prompt's turn would start with

    assert await choices.with_target("s", True, send) == PlanState(True)
    assert await plan_of(plan, "s") == PlanState(True)


async def test_a_refused_prompt_undoes_its_plan_target(session_log: SessionLog) -> None:
    await session_log.create_session("s", "/w")
    choices, plan = plan_choices(session_log)

    async def refused() -> None:
        raise AgentBusy("s")

    with pytest.raises(AgentBusy):
        await choices.with_target("s", True, refused)
    assert await plan_of(plan, "s") == PlanState(False)
    kinds = [e.WhichOneof("body") for e in (await session_log.read("s")).events]
    assert kinds == ["plan_mode", "plan_mode"]  # chosen, then undone: both in the log


async def test_a_prompt_without_a_target_leaves_plan_mode_alone(session_log: SessionLog) -> None:
    await session_log.create_session("s", "/w")
    choices, _ = plan_choices(session_log)

    async def send() -> str:
        return "sent"

    assert await choices.with_target("s", None, send) == "sent"
    assert (await session_log.read("s")).events == []


class InProcessAgents:
    """Agent loads answered by the real agent runtime in this process."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime
        self.loaded: list[str] = []

    async def load(self, session_id: str) -> object:
        self.loaded.append(session_id)
        return await self.runtime.resume(session_id)


async def test_a_choice_while_the_log_shows_a_turn_open_loads_the_agent_then_commits(
    session_log: SessionLog,
) -> None:
    """The turn was left open by a runtime that stopped: loading the agent
    ends it, so the choice commits instead of waiting for a boundary that
    would never come."""
    await session_log.create_session("s", "/w")
    await session_log.append("s", [user("go"), ev.Event(turn_start=ev.TurnStart(turn_id="t"))])
    runtime = AgentRuntime(session_log, BuiltinAdapter())
    agents = InProcessAgents(runtime)
    try:
        choices = PlanChoices(InProcessPlanMode(session_log), KeptPlans(), Unused(), agents)
        chosen = await choices.choose("s", True)
        assert chosen is not None and chosen.outcome == pm.SET_OUTCOME_COMMITTED
        assert agents.loaded == ["s"]
        events = (await session_log.read("s")).events
        ended = [e.turn_end.reason for e in events if e.HasField("turn_end")]
        assert ended == [ev.TURN_END_REASON_INTERRUPTED]
        assert events[-1].HasField("plan_mode") and events[-1].plan_mode.active
    finally:
        await runtime.close()


async def test_a_choice_on_an_idle_agent_needs_no_agent(session_log: SessionLog) -> None:
    await session_log.create_session("s", "/w")
    choices = PlanChoices(InProcessPlanMode(session_log), KeptPlans(), Unused(), Unused())
    chosen = await choices.choose("s", True)
    assert chosen is not None and chosen.outcome == pm.SET_OUTCOME_COMMITTED


async def test_live_events_after_a_catch_up_come_once_each_and_in_order(
    session_log: SessionLog,
) -> None:
    """The catch-up sent seq 0..1; the hub then delivers 1 again (sent
    already) and 4 (past a gap): 2 and 3 are read from the log first."""
    await session_log.create_session("s", "/w")
    await session_log.append("s", [user(f"m{n}") for n in range(5)])
    logged = (await session_log.read("s")).events
    unused: Any = Unused()  # the live part reads only the log
    stream = StreamFrames(session_log, unused, unused, unused, heartbeat_s=60)
    connection = Connection("alice", "c", 1)
    for seq in (1, 4):
        event = gw.SessionEvent(session_id="s", seq=seq, event=logged[seq])
        connection.push(Frame(session_event=event))
    connection.close()  # the hub ends the stream
    frames = [frame async for frame in stream.live(connection, {"s": 1})]
    assert [f.session_event.seq for f in frames] == [2, 3, 4]
