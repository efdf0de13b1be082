"""The log is the one source of truth: two gateway replicas in front of one
stack answer the same, every service can restart without losing a pending
choice or an open question, and a session is never blank after an accepted
prompt."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.models.builtin import ScriptedReply, ScriptedToolCall
from services.common.topology import SERVICES
from tests.support.gateway import Client, GatewayHarness, another_gateway, running_gateway
from tests.support.rpc import expect_rpc_error, reason_of

WAIT_S = 10.0
PLAN = "# Plan\n\n1. Read.\n2. Change."
PENDING_ON = {"active": False, "pending": True}
Frame = gw.ConnectResponse


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[GatewayHarness]:
    async with running_gateway(tmp_path) as harness:
        yield harness


async def new_session(client: Client, cwd: str) -> str:
    reply = await client.stub.CreateSession(gw.CreateSessionRequest(cwd=cwd, fence=client.fence()))
    return str(reply.session.id)


async def prompt(client: Client, session_id: str, text: str) -> None:
    await client.stub.Prompt(
        gw.PromptRequest(session_id=session_id, text=text, fence=client.fence())
    )


async def plan_read(client: Client, session_id: str) -> dict[str, bool] | None:
    """PlanMode's answer, in the projection value's shape (None: unavailable)."""
    reply = await client.stub.PlanMode(gw.PlanModeRequest(session_id=session_id))
    if not reply.plan.HasField("state"):
        return None
    state = reply.plan.state
    shown = {"active": state.active}
    if state.HasField("pending"):
        shown["pending"] = state.pending
    return shown


async def block(client: Client, session_id: str, key: str) -> object:
    opened = await client.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id))
    if key not in opened.projections:
        return None
    value = opened.projections[key]
    if value.HasField("list_value"):
        return [dict(item.struct_value) for item in value.list_value.values]
    return dict(value.struct_value)


def projection_is(session_id: str, key: str, value: object) -> Callable[[Frame], bool]:
    def matches(frame: Frame) -> bool:
        if not frame.HasField("session_projection"):
            return False
        change = frame.session_projection
        if change.session_id != session_id or change.key != key:
            return False
        if change.value.HasField("list_value"):
            return [dict(i.struct_value) for i in change.value.list_value.values] == value
        return dict(change.value.struct_value) == value

    return matches


def open_questions(session_id: str, count: int) -> Callable[[Frame], bool]:
    return lambda f: (
        f.HasField("session_projection")
        and f.session_projection.session_id == session_id
        and f.session_projection.key == "questions"
        and len(f.session_projection.value.list_value.values) == count
    )


def is_idle(session_id: str) -> Callable[[Frame], bool]:
    return lambda f: (
        f.HasField("session_status")
        and f.session_status.session_id == session_id
        and not f.session_status.running
    )


async def events_of(client: Client, session_id: str) -> list[ev.Event]:
    opened = await client.stub.OpenSession(
        gw.OpenSessionRequest(session_id=session_id, message_limit=500)
    )
    return list(opened.events)


def turn_completed(session_id: str) -> Callable[[Frame], bool]:
    """The frame of a turn/end that completed (an idle status frame may be the
    state the reconnected stream starts with, before the prompt's turn ran)."""
    return lambda f: (
        f.HasField("session_event")
        and f.session_event.session_id == session_id
        and f.session_event.event.HasField("turn_end")
        and f.session_event.event.turn_end.reason == ev.TURN_END_REASON_COMPLETED
    )


def shows_plan(header: ev.RequestHeader) -> bool:
    return any(section.id == "plan:policy" for section in header.sections)


async def test_a_pending_choice_is_the_same_everywhere_and_survives_every_restart(
    gateway: GatewayHarness, tmp_path: Path
) -> None:
    async with another_gateway(gateway) as second_address:
        first = gateway.client(client_id="tab-1")
        second = gateway.client_of(second_address, client_id="tab-2")
        await first.connect()
        await second.connect()
        session_id = await new_session(first, str(tmp_path))
        held = gateway.model.enqueue(ScriptedReply(text="working", hold=True))
        await prompt(first, session_id, "go")
        await asyncio.wait_for(held.started.wait(), WAIT_S)

        chosen = await second.stub.SetPlanMode(
            gw.SetPlanModeRequest(session_id=session_id, active=True, fence=second.fence())
        )
        assert chosen.outcome == pm.SET_OUTCOME_QUEUED
        # The same value on both replicas: the stream, the open block, the RPC.
        for client in (first, second):
            await client.next_frame(projection_is(session_id, "plan", PENDING_ON))
            assert await block(client, session_id, "plan") == PENDING_ON
            assert await plan_read(client, session_id) == PENDING_ON

        for name in SERVICES:  # every service of the stack restarts
            await gateway.stack.restart(name)
        for client in (first, second):
            assert await plan_read(client, session_id) == PENDING_ON
            assert await block(client, session_id, "plan") == PENDING_ON

        # The restarted runtime closed the turn it left open; the next boundary
        # applies the choice.
        await first.disconnect()
        await first.connect()
        await prompt(first, session_id, "next")
        await first.next_frame(turn_completed(session_id))
        log = await events_of(first, session_id)
        ends = [e.turn_end.reason for e in log if e.HasField("turn_end")]
        assert ends == [ev.TURN_END_REASON_INTERRUPTED, ev.TURN_END_REASON_COMPLETED]
        headers = [e.request_header for e in log if e.HasField("request_header")]
        assert [shows_plan(h) for h in headers] == [False, True]
        assert await plan_read(second, session_id) == {"active": True}


async def test_a_review_survives_a_reconnect_and_two_answers_make_one(
    gateway: GatewayHarness, tmp_path: Path
) -> None:
    async with another_gateway(gateway) as second_address:
        first = gateway.client(client_id="tab-1")
        second = gateway.client_of(second_address, client_id="tab-2")
        await first.connect()
        session_id = await new_session(first, str(tmp_path))
        await first.stub.SetPlanMode(
            gw.SetPlanModeRequest(session_id=session_id, active=True, fence=first.fence())
        )
        cursor = (await first.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id))).seq
        await first.disconnect()  # away while the question is asked
        gateway.model.enqueue(
            ScriptedReply(tool_calls=[ScriptedToolCall("exit_plan_mode", {"plan": PLAN})])
        )
        await second.connect()
        await prompt(second, session_id, "plan it")
        await second.next_frame(open_questions(session_id, 1))

        # The resumed stream brings the open question.
        first.generation += 1
        await first.connect(cursors={session_id: cursor})
        frame = await first.next_frame(open_questions(session_id, 1))
        question = dict(frame.session_projection.value.list_value.values[0].struct_value)
        assert question["presentation"] == "plan-review" and question["body"] == PLAN

        answers = [
            client.stub.AnswerQuestion(
                gw.AnswerQuestionRequest(
                    session_id=session_id,
                    question_id=str(question["question_id"]),
                    answer=ev.QuestionAnswer(approve=True),
                    fence=client.fence(),
                )
            )
            for client in (first, second)
        ]
        outcomes = await asyncio.gather(*answers, return_exceptions=True)
        failures = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
        assert len(failures) == 1, outcomes
        assert failures[0].code() == grpc.StatusCode.FAILED_PRECONDITION
        assert reason_of(failures[0]) == "QUESTION_ANSWERED"
        await first.next_frame(is_idle(session_id))
        log = await events_of(first, session_id)
        assert sum(e.HasField("question_answered") for e in log) == 1
        assert await plan_read(first, session_id) == {"active": False}


async def test_an_unknown_question_is_not_found(gateway: GatewayHarness, tmp_path: Path) -> None:
    client = gateway.client()
    session_id = await new_session(client, str(tmp_path))
    error = await expect_rpc_error(
        client.stub.AnswerQuestion(
            gw.AnswerQuestionRequest(
                session_id=session_id,
                question_id="q-none",
                answer=ev.QuestionAnswer(approve=True),
                fence=client.fence(),
            )
        ),
        grpc.StatusCode.NOT_FOUND,
    )
    assert reason_of(error) == "QUESTION_NOT_FOUND"


async def test_without_plan_mode_no_plan_key_and_no_reuse_after_an_accepted_prompt(
    tmp_path: Path,
) -> None:
    async with running_gateway(tmp_path / "data", with_plan_mode=False) as gateway:
        client = gateway.client()
        await client.connect()
        folder = tmp_path / "project"
        folder.mkdir()
        workspace = (
            await client.stub.CreateWorkspace(gw.CreateWorkspaceRequest(path=str(folder)))
        ).workspace
        connect = gw.ConnectWorkspaceRequest(workspace_id=workspace.id)
        engaged: set[str] = set()
        for _ in range(100):
            session = (await client.stub.ConnectWorkspace(connect)).session
            assert session.id not in engaged, "a session with an accepted prompt was reused"
            await prompt(client, session.id, "hello")
            engaged.add(session.id)
            # Right after the accepted prompt: never handed out again.
            again = await client.stub.ConnectWorkspace(connect)
            assert again.session.id not in engaged and again.session.blank
        opened = await client.stub.OpenSession(gw.OpenSessionRequest(session_id=session.id))
        assert "plan" not in opened.projections and {"questions", "settings", "status"} <= set(
            opened.projections
        )
        assert await plan_read(client, session.id) is None
        assert all(
            f.session_projection.key != "plan"
            for f in client.received
            if f.HasField("session_projection")
        )
