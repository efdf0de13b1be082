"""Clients through the gateway: accounts, the seed's plan state table, the live
stream with resume, and fencing. The whole stack runs on loopback."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.runtime.v1 import runtime_pb2 as rt

from services.agentruntime.models.builtin import ScriptedReply, ScriptedToolCall
from services.gateway import access as access_module
from services.gateway import hub as hub_module
from services.gateway.service import GatewayDefinition
from tests.support.gateway import BOB, Client, GatewayHarness, running_gateway
from tests.support.rpc import expect_rpc_error, reason_of, violated_fields

WAIT_S = 10.0
Frame = gw.ConnectResponse
# A session's cwd becomes its workspace, which must be an existing folder.
PROJECT = tempfile.gettempdir()


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[GatewayHarness]:
    async with running_gateway(tmp_path) as harness:
        yield harness


async def new_session(client: Client, cwd: str = PROJECT) -> str:
    reply = await client.stub.CreateSession(gw.CreateSessionRequest(cwd=cwd, fence=client.fence()))
    return str(reply.session.id)


async def set_plan(client: Client, session_id: str, active: bool) -> gw.SetPlanModeResponse:
    reply: gw.SetPlanModeResponse = await client.stub.SetPlanMode(
        gw.SetPlanModeRequest(session_id=session_id, active=active, fence=client.fence())
    )
    return reply


async def plan_of(client: Client, session_id: str) -> gw.PlanModeValue:
    reply = await client.stub.PlanMode(gw.PlanModeRequest(session_id=session_id))
    value: gw.PlanModeValue = reply.plan
    return value


async def prompt(client: Client, session_id: str, text: str) -> gw.PromptResponse:
    reply: gw.PromptResponse = await client.stub.Prompt(
        gw.PromptRequest(session_id=session_id, text=text, fence=client.fence())
    )
    return reply


def plan(active: bool, pending: bool | None = None) -> gw.PlanModeValue:
    state = pm.PlanModeState(active=active)
    if pending is not None:
        state.pending = pending
    return gw.PlanModeValue(state=state)


def is_idle(session_id: str):  # type: ignore[no-untyped-def]
    return lambda f: (
        f.HasField("session_status")
        and f.session_status.session_id == session_id
        and not f.session_status.running
    )


def is_plan_event(session_id: str, active: bool):  # type: ignore[no-untyped-def]
    return lambda f: (
        f.HasField("session_event")
        and f.session_event.session_id == session_id
        and f.session_event.event.HasField("plan_mode")
        and f.session_event.event.plan_mode.active == active
    )


def plan_view(active: bool, pending: bool | None = None) -> dict[str, bool]:
    """The `plan` projection value: PlanModeState's shape."""
    return {"active": active} if pending is None else {"active": active, "pending": pending}


def block_plan(opened: gw.OpenSessionResponse) -> dict[str, object] | None:
    if "plan" not in opened.projections:
        return None
    return dict(opened.projections["plan"].struct_value)


def is_plan_view(session_id: str, active: bool, pending: bool | None = None):  # type: ignore[no-untyped-def]
    return lambda f: (
        f.HasField("session_projection")
        and f.session_projection.session_id == session_id
        and f.session_projection.key == "plan"
        and dict(f.session_projection.value.struct_value) == plan_view(active, pending)
    )


async def generating(
    gateway: GatewayHarness, client: Client, session_id: str, tool_step: bool = True
) -> ScriptedReply:
    """Start a turn whose model request is held open (the model is generating)."""
    calls = [ScriptedToolCall("no_such_tool")] if tool_step else []
    reply = gateway.model.enqueue(ScriptedReply(text="working", tool_calls=calls, hold=True))
    await prompt(client, session_id, "go")
    await asyncio.wait_for(reply.started.wait(), WAIT_S)
    return reply


# -- accounts ----------------------------------------------------------------------


async def test_no_token_or_a_wrong_one_is_unauthenticated(gateway: GatewayHarness) -> None:
    for token in (None, "not-a-token"):
        anonymous = gateway.client(token=token)
        error = await expect_rpc_error(
            anonymous.stub.ListWorkspaces(gw.ListWorkspacesRequest()),
            grpc.StatusCode.UNAUTHENTICATED,
        )
        assert reason_of(error) == "UNAUTHENTICATED"


async def test_another_account_cannot_see_or_change_sessions(gateway: GatewayHarness) -> None:
    alice = gateway.client()
    session_id = await new_session(alice)
    workspace = (await alice.stub.ListWorkspaces(gw.ListWorkspacesRequest())).workspaces[0]
    bob = gateway.client(token=BOB, client_id="bob")
    assert list((await bob.stub.ListSessions(gw.ListSessionsRequest())).sessions) == []
    assert list((await bob.stub.ListWorkspaces(gw.ListWorkspacesRequest())).workspaces) == []
    for call in (
        bob.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id)),
        bob.stub.PlanMode(gw.PlanModeRequest(session_id=session_id)),
        bob.stub.SetPlanMode(
            gw.SetPlanModeRequest(session_id=session_id, active=True, fence=bob.fence())
        ),
        bob.stub.Prompt(gw.PromptRequest(session_id=session_id, text="hi", fence=bob.fence())),
        bob.stub.ConnectWorkspace(gw.ConnectWorkspaceRequest(workspace_id=workspace.id)),
    ):
        error = await expect_rpc_error(call, grpc.StatusCode.NOT_FOUND)
        assert reason_of(error) in {"SESSION_NOT_FOUND", "WORKSPACE_NOT_FOUND"}
    assert await plan_of(alice, session_id) == plan(False)
    listed = (await alice.stub.ListSessions(gw.ListSessionsRequest())).sessions
    assert [s.id for s in listed] == [session_id]


# -- the seed's state table ---------------------------------------------------------


async def test_plan_chosen_while_generating_is_pending_then_committed(
    gateway: GatewayHarness,
) -> None:
    client = gateway.client()
    await client.connect()
    session_id = await new_session(client)
    held = await generating(gateway, client, session_id)
    reply = await set_plan(client, session_id, True)
    assert reply.plan == plan(False, pending=True)
    assert reply.outcome == pm.SET_OUTCOME_QUEUED
    assert await plan_of(client, session_id) == plan(False, pending=True)
    held.release()
    await client.next_frame(is_plan_event(session_id, active=True))
    await client.next_frame(is_idle(session_id))
    assert await plan_of(client, session_id) == plan(True)


async def test_default_chosen_while_generating_in_plan_mode(gateway: GatewayHarness) -> None:
    client = gateway.client()
    await client.connect()
    session_id = await new_session(client)
    await set_plan(client, session_id, True)
    held = await generating(gateway, client, session_id)
    assert (await set_plan(client, session_id, False)).plan == plan(True, pending=False)
    held.release()
    await client.next_frame(is_plan_event(session_id, active=False))
    await client.next_frame(is_idle(session_id))
    assert await plan_of(client, session_id) == plan(False)


async def test_reverting_a_pending_plan_logs_nothing(gateway: GatewayHarness) -> None:
    client = gateway.client()
    await client.connect()
    session_id = await new_session(client)
    held = await generating(gateway, client, session_id)
    await set_plan(client, session_id, True)
    reverted = await set_plan(client, session_id, False)
    assert reverted.plan == plan(False) and reverted.outcome == pm.SET_OUTCOME_CANCELLED
    held.release()
    await client.next_frame(is_idle(session_id))
    opened = await client.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id))
    assert not any(e.HasField("plan_mode") for e in opened.events)
    assert block_plan(opened) == plan_view(False)


async def test_without_plan_mode_both_calls_are_unavailable_and_prompts_work(
    tmp_path: Path,
) -> None:
    async with running_gateway(tmp_path, with_plan_mode=False) as gateway:
        client = gateway.client()
        await client.connect()
        session_id = await new_session(client)
        assert not (await plan_of(client, session_id)).HasField("state")
        assert not (await set_plan(client, session_id, True)).plan.HasField("state")
        await prompt(client, session_id, "hello")
        await client.next_frame(is_idle(session_id))
        opened = await client.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id))
        texts = [e.assistant_message.text for e in opened.events if e.HasField("assistant_message")]
        assert texts == ["Echo: hello"]
        # Plan mode is not composed: no `plan` key anywhere.
        assert block_plan(opened) is None
        assert all(
            not f.HasField("session_projection") or f.session_projection.key != "plan"
            for f in client.received
        )


async def test_stop_generation_keeps_the_pending_choice_for_the_next_prompt(
    gateway: GatewayHarness,
) -> None:
    client = gateway.client()
    await client.connect()
    session_id = await new_session(client)
    await generating(gateway, client, session_id, tool_step=False)
    await set_plan(client, session_id, True)
    cancelled = await client.stub.Cancel(
        gw.CancelRequest(session_id=session_id, fence=client.fence())
    )
    assert cancelled.cancelled
    await client.next_frame(is_idle(session_id))
    assert await plan_of(client, session_id) == plan(False, pending=True)
    await prompt(client, session_id, "continue")
    await client.next_frame(is_plan_event(session_id, active=True))
    await client.next_frame(is_idle(session_id))
    assert await plan_of(client, session_id) == plan(True)


async def test_two_clients_see_each_others_choice_pending_included(
    gateway: GatewayHarness,
) -> None:
    first, second = gateway.client(client_id="one"), gateway.client(client_id="two")
    await first.connect()
    await second.connect()
    session_id = await new_session(first)
    await second.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id))
    held = await generating(gateway, first, session_id)
    await set_plan(second, session_id, True)
    await first.next_frame(is_plan_view(session_id, active=False, pending=True))
    held.release()
    await first.next_frame(is_plan_view(session_id, active=True))
    await second.next_frame(is_plan_view(session_id, active=True))
    await first.next_frame(is_idle(session_id))
    await set_plan(first, session_id, False)
    await second.next_frame(is_plan_view(session_id, active=False))


async def test_the_plan_is_answered_and_chosen_while_the_projections_restart(
    gateway: GatewayHarness,
) -> None:
    """A plan read is answered from what the gateway already follows, so
    toggling plan mode keeps working while the projection service is away,
    and each answer reflects the choice just made."""
    client = gateway.client()
    session_id = await new_session(client)
    assert await plan_of(client, session_id) == plan(False)
    await gateway.stack.stop_service("projection")
    try:
        for active in (True, False, True):
            chosen = await set_plan(client, session_id, active)
            reply = await client.stub.PlanMode(gw.PlanModeRequest(session_id=session_id))
            assert reply.plan == plan(active) and reply.seq >= chosen.seq
    finally:
        await gateway.stack.start_service("projection")


async def test_prompt_with_a_plan_target_rolls_back_when_rejected(
    gateway: GatewayHarness,
) -> None:
    client = gateway.client()
    session_id = await new_session(client)
    held = await generating(gateway, client, session_id)
    error = await expect_rpc_error(
        client.stub.Prompt(
            gw.PromptRequest(
                session_id=session_id,
                text="now in plan mode",
                plan_target=True,
                fence=client.fence(),
                mode=rt.PROMPT_MODE_SEND,
            )
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert reason_of(error) == "AGENT_BUSY"
    assert await plan_of(client, session_id) == plan(False)
    held.release()


# -- fencing ------------------------------------------------------------------------


async def test_a_superseded_generation_is_stale(gateway: GatewayHarness) -> None:
    client = gateway.client()
    session_id = await new_session(client)
    await client.connect()
    client.generation = 1
    await client.disconnect()
    await client.connect()
    old = gw.RequestFence(client_id=client.client_id, generation=0, request_id=999)
    error = await expect_rpc_error(
        client.stub.SetPlanMode(
            gw.SetPlanModeRequest(session_id=session_id, active=True, fence=old)
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert reason_of(error) == "STALE"
    assert await plan_of(client, session_id) == plan(False)


async def test_an_older_selection_arriving_after_a_newer_one_is_stale(
    gateway: GatewayHarness,
) -> None:
    client = gateway.client()
    session_id = await new_session(client)
    older, newer = client.fence(), client.fence()
    await client.stub.SetPlanMode(
        gw.SetPlanModeRequest(session_id=session_id, active=True, fence=newer)
    )
    error = await expect_rpc_error(
        client.stub.SetPlanMode(
            gw.SetPlanModeRequest(session_id=session_id, active=False, fence=older)
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert reason_of(error) == "STALE"
    assert await plan_of(client, session_id) == plan(True)


async def test_a_request_refused_as_busy_keeps_its_id_for_the_retry(
    gateway: GatewayHarness,
) -> None:
    client = gateway.client()
    await client.connect()
    session_id = await new_session(client)
    held = await generating(gateway, client, session_id)
    send = gw.PromptRequest(
        session_id=session_id, text="again", mode=rt.PROMPT_MODE_SEND, fence=client.fence()
    )
    error = await expect_rpc_error(client.stub.Prompt(send), grpc.StatusCode.FAILED_PRECONDITION)
    assert reason_of(error) == "AGENT_BUSY"
    held.release()
    await client.next_frame(is_idle(session_id))
    # Nothing was applied, so the same request id is not "already applied".
    assert (await client.stub.Prompt(send)).running
    await client.next_frame(is_idle(session_id))
    opened = await client.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id))
    texts = [e.user_message.text for e in opened.events if e.HasField("user_message")]
    assert texts == ["go", "again"]
    # Once applied, it is used up.
    error = await expect_rpc_error(client.stub.Prompt(send), grpc.StatusCode.FAILED_PRECONDITION)
    assert reason_of(error) == "STALE"


# -- the stream ------------------------------------------------------------------------


async def last_seq_arrives(client: Client, session_id: str) -> int:
    """Wait until the stream has delivered the session's last event."""
    last_seq = int(
        (await client.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id))).seq
    )
    await client.next_frame(
        lambda f: (
            f.HasField("session_event")
            and f.session_event.session_id == session_id
            and f.session_event.seq == last_seq
        ),
        seen_or_next=True,
    )
    return last_seq


def session_seqs(frames: list[Frame], session_id: str) -> list[int]:
    return [
        f.session_event.seq
        for f in frames
        if f.HasField("session_event") and f.session_event.session_id == session_id
    ]


async def test_a_cut_connection_resumes_with_every_event_once(gateway: GatewayHarness) -> None:
    client = gateway.client()
    session_id = await new_session(client)
    await client.connect()
    for n in range(3):
        await prompt(client, session_id, f"message {n}")
        if n == 1:
            await client.disconnect()  # cut while events flow
            seen = session_seqs(client.drain(), session_id)
            client.generation += 1
            await client.connect(cursors={session_id: seen[-1] if seen else -1})
            collected = seen
        await client.next_frame(is_idle(session_id))
    last_seq = await last_seq_arrives(client, session_id)
    collected = collected + session_seqs(client.drain(), session_id)
    assert collected == list(range(last_seq + 1))


async def test_clients_recover_every_event_across_a_gateway_restart(
    gateway: GatewayHarness,
) -> None:
    client = gateway.client()
    session_id = await new_session(client)
    await client.connect(cursors={session_id: -1})
    await prompt(client, session_id, "before")
    await client.next_frame(is_idle(session_id))
    await gateway.stack.restart("gateway")
    await client.disconnect()
    seen = session_seqs(client.drain(), session_id)
    client.generation += 1
    await client.connect(cursors={session_id: seen[-1]})
    await prompt(client, session_id, "after")
    await client.next_frame(is_idle(session_id))
    last_seq = await last_seq_arrives(client, session_id)
    seen += session_seqs(client.drain(), session_id)
    assert seen == list(range(last_seq + 1))


async def test_a_cursor_the_log_cannot_serve_gets_a_resync(gateway: GatewayHarness) -> None:
    client = gateway.client()
    session_id = await new_session(client)
    await client.connect(cursors={session_id: 500})
    frame = await client.next_frame(lambda f: f.HasField("resync"))
    assert frame.resync.session_id == session_id


async def test_open_returns_history_projection_and_plan(gateway: GatewayHarness) -> None:
    client = gateway.client()
    session_id = await new_session(client)
    await client.connect()
    await client.stub.ExecuteCommand(
        gw.ExecuteCommandRequest(
            session_id=session_id, name="plan", args="design it", fence=client.fence()
        )
    )
    await client.next_frame(is_idle(session_id))
    opened = await client.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id))
    assert block_plan(opened) == plan_view(True)
    assert not opened.running and not opened.has_more
    assert opened.seq == opened.events[-1].seq
    users = [e.user_message.text for e in opened.events if e.HasField("user_message")]
    assert users == ["design it"]


async def test_open_shows_one_log_position_while_another_client_switches_plan_mode(
    gateway: GatewayHarness,
) -> None:
    reader, writer = gateway.client(client_id="reader"), gateway.client(client_id="writer")
    session_id = await new_session(reader)
    await reader.connect()
    await prompt(reader, session_id, "hello")  # a message, so the page is not empty
    await reader.next_frame(is_idle(session_id))  # so every switch commits

    switched = 0

    async def switching(until: asyncio.Event) -> None:
        nonlocal switched
        while not until.is_set():
            await set_plan(writer, session_id, switched % 2 == 0)
            switched += 1

    done = asyncio.Event()
    switcher = asyncio.create_task(switching(done))
    opens = 0
    try:
        # At least 40 opens, and on until the writer switched a few times
        # meanwhile (on a loaded machine its calls may be the slower ones).
        async with asyncio.timeout(60):
            while opens < 40 or switched < 4:
                opened = await reader.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id))
                opens += 1
                # The page ends where the block stands, and the block's plan is
                # the last switch of that page (the page holds the whole log).
                assert not opened.has_more and opened.events[-1].seq == opened.seq
                switches = [e.plan_mode.active for e in opened.events if e.HasField("plan_mode")]
                assert block_plan(opened) == plan_view(switches[-1] if switches else False)
    finally:
        done.set()
        await switcher


async def test_the_stream_survives_a_session_log_restart(gateway: GatewayHarness) -> None:
    client = gateway.client()
    session_id = await new_session(client)
    await client.connect(cursors={session_id: -1})
    await prompt(client, session_id, "before")
    await client.next_frame(is_idle(session_id))
    await gateway.stack.restart("sessionlog")
    await prompt(client, session_id, "after")
    await client.next_frame(is_idle(session_id))
    last_seq = await last_seq_arrives(client, session_id)
    assert session_seqs(client.drain(), session_id) == list(range(last_seq + 1))


async def test_open_serves_history_while_projections_are_down(gateway: GatewayHarness) -> None:
    client = gateway.client()
    session_id = await new_session(client)
    await client.connect()
    await prompt(client, session_id, "hello")
    await client.next_frame(is_idle(session_id))
    await gateway.stack.stop_service("projection")
    opened = await client.stub.OpenSession(
        gw.OpenSessionRequest(session_id=session_id), wait_for_ready=True, timeout=10
    )
    assert "unavailable" in opened.projection_error and not opened.projections
    assert [e.user_message.text for e in opened.events if e.HasField("user_message")] == ["hello"]
    await gateway.stack.start_service("projection")
    assert await plan_of(client, session_id) == plan(False)


async def test_a_choice_on_an_idle_session_commits_while_the_runtime_restarts(
    gateway: GatewayHarness,
) -> None:
    # Plan mode decides from the log: an idle session's agent is not needed.
    client = gateway.client()
    session_id = await new_session(client)
    await gateway.stack.stop_service("agentruntime")
    entered = await set_plan(client, session_id, True)
    assert (entered.outcome, entered.plan) == (pm.SET_OUTCOME_COMMITTED, plan(True))
    await gateway.stack.start_service("agentruntime")
    await client.connect()
    await prompt(client, session_id, "hello")
    await client.next_frame(is_idle(session_id))
    assert await plan_of(client, session_id) == plan(True)


async def test_plan_mode_down_does_not_change_what_clients_read(gateway: GatewayHarness) -> None:
    client = gateway.client()
    session_id = await new_session(client)
    await set_plan(client, session_id, True)
    await gateway.stack.stop_service("planmode")
    opened = await client.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id))
    assert block_plan(opened) == plan_view(True) and not opened.projection_error
    assert await plan_of(client, session_id) == plan(True)


async def test_a_newer_generation_ends_the_superseded_stream(gateway: GatewayHarness) -> None:
    old = gateway.client(client_id="phone")
    await old.connect()
    reader = old._reader
    newer = gateway.client(client_id="phone")
    newer.generation = 1
    await newer.connect()
    assert reader is not None
    await asyncio.wait_for(reader, WAIT_S)  # the old stream ended


async def test_the_callers_deadline_bounds_the_calls_made_on_its_behalf(
    gateway: GatewayHarness,
) -> None:
    client = gateway.client()
    session_id = await new_session(client)
    await gateway.stack.stop_service("planmode")
    async with asyncio.timeout(WAIT_S):  # it must not wait for plan mode to come back
        await expect_rpc_error(
            client.stub.SetPlanMode(
                gw.SetPlanModeRequest(session_id=session_id, active=True, fence=client.fence()),
                timeout=0.5,
                wait_for_ready=True,
            ),
            grpc.StatusCode.DEADLINE_EXCEEDED,
        )


async def test_a_malformed_cursor_is_refused_before_any_frame(gateway: GatewayHarness) -> None:
    client = gateway.client()
    session_id = await new_session(client)
    for cursors, field in (({"not a session id": 0}, "cursors"), ({session_id: -2}, "cursors")):
        call = client.stub.Connect(
            gw.ConnectRequest(client_id=client.client_id, generation=0, cursors=cursors)
        )
        error = await expect_rpc_error(call.read(), grpc.StatusCode.INVALID_ARGUMENT)
        assert "ConnectRequest" in (error.details() or "")
        assert [f.split("[")[0] for f in violated_fields(error)] == [field]
    # -1 is "nothing seen yet": the session's events from the start.
    await client.connect(cursors={session_id: -1})
    await client.stub.ExecuteCommand(
        gw.ExecuteCommandRequest(session_id=session_id, name="plan", fence=client.fence())
    )
    await client.next_frame(is_plan_event(session_id, active=True))


# -- memory ------------------------------------------------------------------------------


async def test_ownership_caches_stay_bounded_and_frames_still_reach_only_the_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(access_module, "ACCESS_KEPT", 3)
    monkeypatch.setattr(hub_module, "OWNERS_KEPT", 3)
    async with running_gateway(tmp_path) as gateway:
        alice, bob = gateway.client(), gateway.client(token=BOB, client_id="bob")
        await alice.connect()
        await bob.connect()
        sessions = [await new_session(alice) for _ in range(6)]
        for session_id in sessions:
            await set_plan(alice, session_id, True)
            await alice.next_frame(is_plan_event(session_id, active=True))
        servicer = gateway.stack.definitions["gateway"]
        assert isinstance(servicer, GatewayDefinition) and servicer.servicer is not None
        assert (
            len(servicer.servicer.access._checked) == 3 and len(servicer.servicer.hub._owners) <= 3
        )

        # The first session was forgotten by both: it still works for her
        # alone, and her frames of it still reach her, never him.
        first = sessions[0]
        await set_plan(alice, first, False)
        await alice.next_frame(is_plan_event(first, active=False))
        await expect_rpc_error(plan_of(bob, first), grpc.StatusCode.NOT_FOUND)
        his = await new_session(bob)
        await set_plan(bob, his, True)
        await bob.next_frame(is_plan_event(his, active=True))
        assert first not in session_seqs_by_session(bob.received)
        assert (
            len(servicer.servicer.access._checked) == 3 and len(servicer.servicer.hub._owners) <= 3
        )


def session_seqs_by_session(frames: list[Frame]) -> dict[str, list[int]]:
    seqs: dict[str, list[int]] = {}
    for frame in frames:
        if frame.HasField("session_event"):
            seqs.setdefault(frame.session_event.session_id, []).append(frame.session_event.seq)
    return seqs
