"""Two accounts on one gateway, bob probing alice: every RPC and the stream
answer him exactly as for something that does not exist, and nothing he
does (a client id of hers, a session id of hers) changes what she gets."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import grpc
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.common.status import error_info
from tests.support.gateway import ALICE, BOB, Client, GatewayHarness, running_gateway
from tests.support.rpc import expect_rpc_error, reason_of

Frame = gw.ConnectResponse


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[GatewayHarness]:
    async with running_gateway(tmp_path / "data") as harness:
        yield harness


@pytest.fixture
def folder(tmp_path: Path) -> str:
    path = tmp_path / "project"
    path.mkdir()
    return str(path)


async def new_session(client: Client, cwd: str, session_id: str = "") -> gw.CreateSessionResponse:
    reply: gw.CreateSessionResponse = await client.stub.CreateSession(
        gw.CreateSessionRequest(cwd=cwd, session_id=session_id, fence=client.fence())
    )
    return reply


async def set_plan(client: Client, session_id: str, active: bool) -> gw.SetPlanModeResponse:
    reply: gw.SetPlanModeResponse = await client.stub.SetPlanMode(
        gw.SetPlanModeRequest(session_id=session_id, active=active, fence=client.fence())
    )
    return reply


def is_plan_event(session_id: str, active: bool):  # type: ignore[no-untyped-def]
    return lambda f: (
        f.HasField("session_event")
        and f.session_event.session_id == session_id
        and f.session_event.event.HasField("plan_mode")
        and f.session_event.event.plan_mode.active == active
    )


# -- every RPC ---------------------------------------------------------------------------

UNKNOWN_SESSION, UNKNOWN_WORKSPACE = "s-" + "0" * 32, "w-" + "0" * 32
SERVICE = gw.DESCRIPTOR.services_by_name["GatewayService"]


def probes(bob: Client, session_id: str, workspace_id: str) -> dict[str, Awaitable[object]]:
    """Bob's call of each RPC that names a session or workspace, aimed at these."""

    async def export() -> list[gw.ExportSessionResponse]:
        call = bob.stub.ExportSession(gw.ExportSessionRequest(session_id=session_id))
        return [line async for line in call]

    sid, stub = session_id, bob.stub
    return {
        "CreateSession": stub.CreateSession(
            gw.CreateSessionRequest(workspace_id=workspace_id, fence=bob.fence())
        ),
        "ListSessions": stub.ListSessions(gw.ListSessionsRequest(workspace_id=workspace_id)),
        "SearchSessions": stub.SearchSessions(
            gw.SearchSessionsRequest(query="mine", workspace_id=workspace_id)
        ),
        "RenameSession": stub.RenameSession(
            gw.RenameSessionRequest(session_id=sid, title="his", fence=bob.fence())
        ),
        "ArchiveSession": stub.ArchiveSession(
            gw.ArchiveSessionRequest(session_id=sid, archived=True, fence=bob.fence())
        ),
        "ForkSession": stub.ForkSession(gw.ForkSessionRequest(session_id=sid, fence=bob.fence())),
        "DeleteSession": stub.DeleteSession(
            gw.DeleteSessionRequest(session_id=sid, fence=bob.fence())
        ),
        "ExportSession": export(),
        "OpenSession": stub.OpenSession(gw.OpenSessionRequest(session_id=sid)),
        "HistoryPage": stub.HistoryPage(gw.HistoryPageRequest(session_id=sid, before_seq=5)),
        "Prompt": stub.Prompt(gw.PromptRequest(session_id=sid, text="hi", fence=bob.fence())),
        "ReadImage": stub.ReadImage(
            gw.ReadImageRequest(session_id=sid, digest="sha256:" + "0" * 64)
        ),
        "Cancel": stub.Cancel(gw.CancelRequest(session_id=sid, fence=bob.fence())),
        "ListCommands": stub.ListCommands(gw.ListCommandsRequest(session_id=sid)),
        "ExecuteCommand": stub.ExecuteCommand(
            gw.ExecuteCommandRequest(session_id=sid, name="plan", fence=bob.fence())
        ),
        "PlanMode": stub.PlanMode(gw.PlanModeRequest(session_id=sid)),
        "SetPlanMode": stub.SetPlanMode(
            gw.SetPlanModeRequest(session_id=sid, active=True, fence=bob.fence())
        ),
        "AnswerQuestion": stub.AnswerQuestion(
            gw.AnswerQuestionRequest(
                session_id=sid,
                question_id="q-1",
                answer=ev.QuestionAnswer(approve=True),
                fence=bob.fence(),
            )
        ),
        "UpdateSessionSettings": stub.UpdateSessionSettings(
            gw.UpdateSessionSettingsRequest(
                session_id=sid, sandbox=ev.SANDBOX_FULL, fence=bob.fence()
            )
        ),
        "ListModels": stub.ListModels(gw.ListModelsRequest(session_id=sid)),
        "ListPaths": stub.ListPaths(gw.ListPathsRequest(session_id=sid, prefix="")),
        "ConnectWorkspace": stub.ConnectWorkspace(
            gw.ConnectWorkspaceRequest(workspace_id=workspace_id)
        ),
    }


def as_seen(error: grpc.aio.AioRpcError, *ids: str) -> tuple[object, ...]:
    """What a client sees of an error, with the ids it named blanked."""

    def blank(text: str) -> str:
        for named in ids:
            text = text.replace(named, "<id>")
        return text

    info = error_info(error)
    assert info is not None
    metadata = {key: blank(value) for key, value in info.metadata.items()}
    return (error.code(), info.reason, blank(error.details() or ""), metadata)


async def test_every_rpc_answers_bob_about_alices_things_as_about_unknown_ones(
    gateway: GatewayHarness, folder: str
) -> None:
    alice, bob = gateway.client(ALICE), gateway.client(BOB, client_id="bob")
    await alice.connect()
    mine = (await new_session(alice, folder)).session.id
    await alice.stub.Prompt(gw.PromptRequest(session_id=mine, text="mine", fence=alice.fence()))
    await alice.next_frame(lambda f: f.HasField("session_status") and not f.session_status.running)
    (workspace,) = (await alice.stub.ListWorkspaces(gw.ListWorkspacesRequest())).workspaces
    before = await alice.stub.OpenSession(gw.OpenSessionRequest(session_id=mine))

    hers = probes(bob, mine, workspace.id)
    unknown = probes(bob, UNKNOWN_SESSION, UNKNOWN_WORKSPACE)
    for method in hers:
        foreign = await expect_rpc_error(hers[method], grpc.StatusCode.NOT_FOUND)
        missing = await expect_rpc_error(unknown[method], grpc.StatusCode.NOT_FOUND)
        assert as_seen(foreign, mine, workspace.id) == as_seen(
            missing, UNKNOWN_SESSION, UNKNOWN_WORKSPACE
        ), method

    # The calls that name nothing of hers show him nothing of hers.
    assert list((await bob.stub.ListSessions(gw.ListSessionsRequest())).sessions) == []
    found = await bob.stub.SearchSessions(gw.SearchSessionsRequest(query="mine"))
    assert list(found.hits) == []
    assert list((await bob.stub.ListWorkspaces(gw.ListWorkspacesRequest())).workspaces) == []
    assert not (await bob.stub.RecentWorkspace(gw.RecentWorkspaceRequest())).HasField("workspace")
    his = (await bob.stub.CreateWorkspace(gw.CreateWorkspaceRequest(path=folder))).workspace
    assert his.id != workspace.id and list(his.session_ids) == []
    streamed = {"Connect"}  # test_the_stream_treats_alices_sessions_as_unknown_...
    unnamed = {"ListWorkspaces", "RecentWorkspace", "CreateWorkspace"}
    assert set(hers) | streamed | unnamed == {m.name for m in SERVICE.methods}

    # And nothing of hers changed.
    after = await alice.stub.OpenSession(gw.OpenSessionRequest(session_id=mine))
    assert (after.seq, after.session.title, dict(after.projections)) == (
        before.seq,
        before.session.title,
        dict(before.projections),
    )
    (still,) = (await alice.stub.ListWorkspaces(gw.ListWorkspacesRequest())).workspaces
    assert list(still.session_ids) == [mine] and list(still.archived_session_ids) == []


# -- fences ------------------------------------------------------------------------------


async def test_bob_using_alices_client_id_cannot_lock_her_out(
    gateway: GatewayHarness, folder: str
) -> None:
    alice = gateway.client(ALICE, client_id="laptop")
    bob = gateway.client(BOB, client_id="laptop")
    mine = (await new_session(alice, folder)).session.id
    his = (await new_session(bob, folder)).session.id
    await alice.connect()
    # Bob connects with her client id at a higher generation and sends
    # fenced requests far ahead of hers, on his session and on hers.
    bob.generation, bob.request_id = 7, 1000
    await bob.connect()
    await set_plan(bob, his, True)
    error = await expect_rpc_error(set_plan(bob, mine, True), grpc.StatusCode.NOT_FOUND)
    assert reason_of(error) == "SESSION_NOT_FOUND"

    reply = await set_plan(alice, mine, True)
    assert reply.plan.state.active
    # Her stream was not ended by his connection: it carries her change.
    await alice.next_frame(is_plan_event(mine, True))
    await alice.stub.OpenSession(gw.OpenSessionRequest(session_id=mine, fence=alice.fence()))


# -- session ids -------------------------------------------------------------------------


async def test_creating_with_alices_session_ids_is_as_with_free_ones(
    gateway: GatewayHarness, folder: str
) -> None:
    alice, bob = gateway.client(ALICE), gateway.client(BOB, client_id="bob")
    mine = (await new_session(alice, folder, session_id="my-id")).session
    assert (await new_session(alice, folder, session_id="my-id")).session.id == mine.id

    free = await new_session(bob, folder, session_id="nobody-uses-this")
    for squatted in ("my-id", mine.id):
        reply = await new_session(bob, folder, session_id=squatted)
        assert reply.session.id not in {mine.id, free.session.id}
        # Exactly what a free id gets: a new blank session of his, at seq -1.
        assert (reply.seq, reply.session.blank, reply.session.cwd) == (
            free.seq,
            free.session.blank,
            free.session.cwd,
        )
        again = await new_session(bob, folder, session_id=squatted)
        assert again.session.id == reply.session.id

    # Nothing of hers changed, and hers is still hidden from him.
    (workspace,) = (await alice.stub.ListWorkspaces(gw.ListWorkspacesRequest())).workspaces
    assert list(workspace.session_ids) == [mine.id]
    error = await expect_rpc_error(
        bob.stub.OpenSession(gw.OpenSessionRequest(session_id=mine.id)),
        grpc.StatusCode.NOT_FOUND,
    )
    assert reason_of(error) == "SESSION_NOT_FOUND"


async def test_a_refused_create_in_a_new_folder_leaves_no_workspace(
    gateway: GatewayHarness, folder: str, tmp_path: Path
) -> None:
    alice = gateway.client(ALICE)
    first = (await new_session(alice, folder, session_id="taken")).session
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    error = await expect_rpc_error(
        new_session(alice, str(elsewhere), session_id="taken"), grpc.StatusCode.ALREADY_EXISTS
    )
    assert reason_of(error) == "SESSION_CONFLICT"
    workspaces = (await alice.stub.ListWorkspaces(gw.ListWorkspacesRequest())).workspaces
    assert [(w.path, list(w.session_ids)) for w in workspaces] == [(folder, [first.id])]


# -- the stream --------------------------------------------------------------------------


def sessions_shown(frames: list[Frame]) -> set[str]:
    """The sessions whose content (events, status, views, text) frames carry."""
    ids = set()
    for frame in frames:
        kind = frame.WhichOneof("frame")
        if kind in {
            "session_event",
            "session_status",
            "session_projection",
            "assistant_delta",
            "tool_output",
        }:
            ids.add(getattr(frame, str(kind)).session_id)
        elif kind == "session_added":
            ids.add(frame.session_added.summary.id)
    return ids


async def test_the_stream_treats_alices_sessions_as_unknown_and_carries_none_of_hers(
    gateway: GatewayHarness, folder: str
) -> None:
    alice, bob = gateway.client(ALICE), gateway.client(BOB, client_id="bob")
    await alice.connect()
    mine = (await new_session(alice, folder)).session.id
    await set_plan(alice, mine, True)
    his = (await new_session(bob, folder)).session.id
    await set_plan(bob, his, True)
    unknown = "s-" + "0" * 32

    await bob.connect(cursors={mine: -1, unknown: -1, his: -1})
    resyncs = {}
    for _ in range(2):
        frame = await bob.next_frame(lambda f: f.HasField("resync"))
        resyncs[frame.resync.session_id] = frame.resync.reason
    assert resyncs == {mine: resyncs[unknown], unknown: resyncs[unknown]}
    # His own session resumed on the same stream, and it stays live.
    await bob.next_frame(is_plan_event(his, True), seen_or_next=True)
    await set_plan(alice, mine, False)
    await set_plan(bob, his, False)
    await bob.next_frame(is_plan_event(his, False))
    await alice.next_frame(is_plan_event(mine, False), seen_or_next=True)
    assert mine not in sessions_shown(bob.received)
    assert his not in sessions_shown(alice.received)
