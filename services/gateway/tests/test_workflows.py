"""The gateway's workflows as plain Python, without a server: the summaries
a session list is made of (read from the real SQLite session log), whether
a session shows as running when it opens, and a prompt's plan target
(plan mode answered in-process by its real servicer and controller)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev
from google.protobuf import json_format, struct_pb2

from agenthost_core.plan import PlanState
from services.agentruntime.agent import AgentBusy
from services.gateway import listing
from services.gateway.kept_plans import KeptPlans
from services.gateway.opening import running_of
from services.gateway.plan_choices import PlanChoices
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
