"""The workspace service over gRPC on loopback, with a real session-log host.

Both services run in-process on SQLite files under tmp_path and share one
hand-moved clock, so session `updated_at` and workspace `created_at` (and ties
between them) are exact. The test drives the session log through its gRPC
client, as the agent runtime does when it accepts a prompt.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev
from agenthost.workspace.v1 import workspace_pb2 as pb
from agenthost.workspace.v1 import workspace_pb2_grpc as pb_grpc

from services.common.client import open_channel
from services.common.errors import SessionConflict, SessionNotFound, WrongExpectedSeq
from services.common.server import ServiceHost
from services.planmode.events import command_done_event, command_run_event, plan_mode_event
from services.sessionlog.client import SessionLogClient
from services.workspace.client import Workspace, WorkspaceClient
from services.workspace.errors import InvalidWorkspacePath, WorkspaceNotFound
from services.workspace.service import workspace_service
from tests.support.clocks import ManualClock, timed_session_log_service
from tests.support.events import turn_start, user
from tests.support.folders import Folders
from tests.support.hosts import running_host
from tests.support.rpc import expect_rpc_error, reason_of, violated_fields

ACCOUNT = "acct"
STRANGER = "other-acct"
NOT_FOUND = grpc.StatusCode.NOT_FOUND
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def accepted_prompt(text: str = "hello") -> list[ev.Event]:
    """What the runtime appends when it accepts a user's first prompt."""
    return [turn_start("t-1"), user(text)]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def log_host(tmp_path: Path, clock: ManualClock) -> AsyncIterator[ServiceHost]:
    definition = timed_session_log_service(tmp_path / "sessionlog.db", clock)
    async with running_host("sessionlog", definition, tmp_path) as (host, _):
        yield host


@pytest.fixture
async def log(log_host: ServiceHost) -> AsyncIterator[SessionLogClient]:
    """The test's own connection to the session log."""
    channel = open_channel(log_host.address)
    try:
        yield SessionLogClient(channel)
    finally:
        await channel.close()


@pytest.fixture
async def channel(
    tmp_path: Path, log_host: ServiceHost, clock: ManualClock
) -> AsyncIterator[grpc.aio.Channel]:
    """The workspace service, with its own channel to the session log."""
    log_channel = open_channel(log_host.address)
    data_dir = tmp_path / "workspace"
    definition = workspace_service(data_dir, SessionLogClient(log_channel), clock=clock)
    try:
        async with running_host("workspace", definition, data_dir) as (_, channel):
            yield channel
    finally:
        await log_channel.close()


@pytest.fixture
def workspaces(channel: grpc.aio.Channel) -> WorkspaceClient:
    return WorkspaceClient(channel)


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> pb_grpc.WorkspaceServiceStub:
    return pb_grpc.WorkspaceServiceStub(channel)


@pytest.fixture
async def app(workspaces: WorkspaceClient, folders: Folders) -> Workspace:
    workspace, created = await workspaces.create(ACCOUNT, folders("/src/app"))
    assert created
    return workspace


async def members(workspaces: WorkspaceClient, workspace: Workspace) -> list[str]:
    return list((await workspaces.get(ACCOUNT, workspace.id)).session_ids)


# -- ConnectWorkspace -------------------------------------------------------------------


async def test_a_blank_member_is_reused_and_nothing_new_is_created(
    workspaces: WorkspaceClient, app: Workspace, log: SessionLogClient, folders: Folders
) -> None:
    first, reused = await workspaces.connect(ACCOUNT, app.id)
    assert not reused
    assert first.blank and first.cwd == folders("/src/app")
    assert (await log.get_session(first.id)).cwd == folders("/src/app")

    again, reused = await workspaces.connect(ACCOUNT, app.id)

    assert reused and again.id == first.id
    assert await members(workspaces, app) == [first.id]


async def test_a_blank_session_in_the_same_directory_that_is_not_a_member_is_not_reused(
    workspaces: WorkspaceClient, app: Workspace, log: SessionLogClient, folders: Folders
) -> None:
    # A CLI session in the same directory, durable and still blank.
    await log.create_session("cli-session", folders("/src/app"))
    await log.append("cli-session", [plan_mode_event(True)])
    assert (await log.get_session("cli-session")).blank

    session, reused = await workspaces.connect(ACCOUNT, app.id)

    assert not reused and session.id != "cli-session"
    assert await members(workspaces, app) == [session.id]
    assert await workspaces.find_session_workspace(ACCOUNT, "cli-session") is None


async def test_an_archived_blank_session_is_not_reused(
    workspaces: WorkspaceClient, app: Workspace
) -> None:
    first, _ = await workspaces.connect(ACCOUNT, app.id)
    archived = await workspaces.archive(ACCOUNT, app.id, first.id)
    assert list(archived.session_ids) == [] and list(archived.archived_session_ids) == [first.id]

    second, reused = await workspaces.connect(ACCOUNT, app.id)

    assert not reused and second.id != first.id
    shown = await workspaces.get(ACCOUNT, app.id)
    assert list(shown.session_ids) == [second.id]
    assert list(shown.archived_session_ids) == [first.id]


async def test_a_session_that_accepted_its_first_prompt_is_not_reused(
    workspaces: WorkspaceClient, app: Workspace, log: SessionLogClient
) -> None:
    first, _ = await workspaces.connect(ACCOUNT, app.id)
    await log.append(first.id, accepted_prompt())
    assert not (await log.get_session(first.id)).blank

    second, reused = await workspaces.connect(ACCOUNT, app.id)

    assert not reused and second.id != first.id and second.blank
    assert await members(workspaces, app) == [first.id, second.id]


async def test_a_session_whose_first_prompt_was_rejected_stays_reusable(
    workspaces: WorkspaceClient, app: Workspace, log: SessionLogClient
) -> None:
    first, _ = await workspaces.connect(ACCOUNT, app.id)
    # The prompt lost a race for the log (another writer was expected): nothing appended.
    with pytest.raises(WrongExpectedSeq):
        await log.append(first.id, accepted_prompt(), expected_last_seq=3)
    # /plan is a command, not a turn: the session stays blank.
    await log.append(
        first.id,
        [command_run_event("c1", ""), plan_mode_event(True), command_done_event("c1", True, "")],
    )

    again, reused = await workspaces.connect(ACCOUNT, app.id)

    assert reused and again.id == first.id and again.blank
    assert await members(workspaces, app) == [first.id]


async def test_ten_concurrent_connects_land_in_one_session(
    workspaces: WorkspaceClient, app: Workspace
) -> None:
    results = await asyncio.gather(*(workspaces.connect(ACCOUNT, app.id) for _ in range(10)))

    assert len({session.id for session, _ in results}) == 1
    assert await members(workspaces, app) == [results[0][0].id]


async def test_an_unknown_workspace_is_not_found_and_nothing_is_created(
    workspaces: WorkspaceClient, app: Workspace, stub: pb_grpc.WorkspaceServiceStub
) -> None:
    error = await expect_rpc_error(
        stub.ConnectWorkspace(
            pb.ConnectWorkspaceRequest(account_id=ACCOUNT, workspace_id="w-missing")
        ),
        NOT_FOUND,
    )
    assert reason_of(error) == "WORKSPACE_NOT_FOUND"
    with pytest.raises(WorkspaceNotFound):
        await workspaces.connect(ACCOUNT, "w-missing")
    with pytest.raises(WorkspaceNotFound):
        await workspaces.create_session(ACCOUNT, "w-missing")

    listed = await workspaces.list(ACCOUNT)
    assert [w.id for w in listed] == [app.id]
    assert list(listed[0].session_ids) == [] and list(listed[0].archived_session_ids) == []


# -- sessions, membership, canonical paths -----------------------------------------------


async def test_sessions_created_in_a_workspace_are_found_there(
    workspaces: WorkspaceClient, app: Workspace, log: SessionLogClient, folders: Folders
) -> None:
    chosen = await workspaces.create_session(ACCOUNT, app.id, "my-session")
    generated = await workspaces.create_session(ACCOUNT, app.id)
    assert chosen.id == "my-session" and generated.id != chosen.id
    # Retrying with the caller's id is the same session.
    assert (await workspaces.create_session(ACCOUNT, app.id, "my-session")).id == "my-session"
    assert await members(workspaces, app) == ["my-session", generated.id]

    found = await workspaces.find_session_workspace(ACCOUNT, generated.id)
    assert found is not None and found.id == app.id
    assert await workspaces.find_session_workspace(ACCOUNT, "nowhere") is None

    await log.create_session("outside", folders("/src/app"))
    with pytest.raises(SessionConflict):
        await workspaces.create_session(ACCOUNT, app.id, "outside")
    with pytest.raises(SessionNotFound):
        await workspaces.archive(ACCOUNT, app.id, "outside")


async def test_one_directory_is_one_workspace_however_it_is_spelled(
    workspaces: WorkspaceClient, tmp_path: Path
) -> None:
    real = tmp_path / "project"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)

    first, created = await workspaces.create(ACCOUNT, str(real))
    again, created_again = await workspaces.create(ACCOUNT, f"{tmp_path}/link/")

    assert created and not created_again
    assert again.id == first.id and again.path == str(real.resolve())
    assert [w.id for w in await workspaces.list(ACCOUNT)] == [first.id]


async def test_another_accounts_workspace_is_not_found(
    workspaces: WorkspaceClient, app: Workspace, stub: pb_grpc.WorkspaceServiceStub
) -> None:
    mine, _ = await workspaces.connect(ACCOUNT, app.id)

    calls = [
        stub.GetWorkspace(pb.GetWorkspaceRequest(account_id=STRANGER, workspace_id=app.id)),
        stub.ConnectWorkspace(pb.ConnectWorkspaceRequest(account_id=STRANGER, workspace_id=app.id)),
        stub.CreateWorkspaceSession(
            pb.CreateWorkspaceSessionRequest(account_id=STRANGER, workspace_id=app.id)
        ),
        stub.ArchiveSession(
            pb.ArchiveSessionRequest(account_id=STRANGER, workspace_id=app.id, session_id=mine.id)
        ),
    ]
    for call in calls:
        assert reason_of(await expect_rpc_error(call, NOT_FOUND)) == "WORKSPACE_NOT_FOUND"
    assert await workspaces.list(STRANGER) == []
    assert await workspaces.recent(STRANGER) is None
    assert await workspaces.find_session_workspace(STRANGER, mine.id) is None

    # The owner's workspace is as it was: no session added, none archived.
    shown = await workspaces.get(ACCOUNT, app.id)
    assert list(shown.session_ids) == [mine.id] and list(shown.archived_session_ids) == []


# -- RecentWorkspace -----------------------------------------------------------------------


async def recent_path(workspaces: WorkspaceClient) -> str | None:
    recent = await workspaces.recent(ACCOUNT)
    return None if recent is None else recent.path


async def test_no_workspaces_means_no_recent_workspace(
    workspaces: WorkspaceClient, stub: pb_grpc.WorkspaceServiceStub
) -> None:
    reply = await stub.RecentWorkspace(pb.RecentWorkspaceRequest(account_id=ACCOUNT))
    assert not reply.HasField("workspace")
    assert await workspaces.recent(ACCOUNT) is None


async def test_without_sessions_the_newest_workspace_wins_and_ties_keep_list_order(
    workspaces: WorkspaceClient, clock: ManualClock, folders: Folders
) -> None:
    await workspaces.create(ACCOUNT, folders("/a"))
    await workspaces.create(ACCOUNT, folders("/b"))  # the same instant as /a
    assert await recent_path(workspaces) == folders("/a")

    clock.advance()
    await workspaces.create(ACCOUNT, folders("/c"))
    assert await recent_path(workspaces) == folders("/c")


async def test_the_latest_session_activity_wins(
    workspaces: WorkspaceClient, log: SessionLogClient, clock: ManualClock, folders: Folders
) -> None:
    old, _ = await workspaces.create(ACCOUNT, folders("/old"))
    session, _ = await workspaces.connect(ACCOUNT, old.id)
    clock.advance()
    new, _ = await workspaces.create(ACCOUNT, folders("/new"))
    assert await recent_path(workspaces) == folders("/new")  # no session, but created later

    clock.advance()
    await log.append(session.id, accepted_prompt())
    assert await recent_path(workspaces) == folders("/old")

    clock.advance()
    await workspaces.connect(ACCOUNT, new.id)  # a blank session counts from its creation
    assert await recent_path(workspaces) == folders("/new")


async def test_ties_between_session_activity_and_creation_keep_list_order(
    workspaces: WorkspaceClient, log: SessionLogClient, clock: ManualClock, folders: Folders
) -> None:
    await workspaces.create(ACCOUNT, folders("/quiet"))
    busy, _ = await workspaces.create(ACCOUNT, folders("/busy"))
    session, _ = await workspaces.connect(ACCOUNT, busy.id)
    # /busy's blank session was created at the instant /quiet was: /quiet is listed first.
    assert await recent_path(workspaces) == folders("/quiet")

    clock.advance()
    await log.append(session.id, accepted_prompt())
    assert await recent_path(workspaces) == folders("/busy")

    clock.advance()
    await workspaces.create(ACCOUNT, folders("/fresh"))
    assert await recent_path(workspaces) == folders("/fresh")
    await log.append(session.id, [user("again")])  # the same instant: /busy is listed first
    assert await recent_path(workspaces) == folders("/busy")


async def test_archived_sessions_do_not_make_a_workspace_recent(
    workspaces: WorkspaceClient, log: SessionLogClient, clock: ManualClock, folders: Folders
) -> None:
    old, _ = await workspaces.create(ACCOUNT, folders("/old"))
    session, _ = await workspaces.connect(ACCOUNT, old.id)
    clock.advance()
    await workspaces.create(ACCOUNT, folders("/new"))
    clock.advance()
    await log.append(session.id, accepted_prompt())
    assert await recent_path(workspaces) == folders("/old")

    await workspaces.archive(ACCOUNT, old.id, session.id)
    assert await recent_path(workspaces) == folders("/new")


# -- invalid requests ------------------------------------------------------------------------


def _create(account_id: str, path: str) -> pb.CreateWorkspaceRequest:
    return pb.CreateWorkspaceRequest(account_id=account_id, path=path)


@pytest.mark.parametrize(
    ("method", "request_", "fields"),
    [
        ("CreateWorkspace", _create(ACCOUNT, "src/app"), ["path"]),
        ("CreateWorkspace", _create(ACCOUNT, ""), ["path"]),
        ("CreateWorkspace", _create("bad id!", "/a"), ["account_id"]),
        ("CreateWorkspace", _create(ACCOUNT, "/" + "x" * 4096), ["path"]),
        (
            "GetWorkspace",
            pb.GetWorkspaceRequest(account_id=ACCOUNT, workspace_id=""),
            ["workspace_id"],
        ),
        ("ListWorkspaces", pb.ListWorkspacesRequest(account_id=""), ["account_id"]),
        (
            "ConnectWorkspace",
            pb.ConnectWorkspaceRequest(account_id=ACCOUNT, workspace_id="w/1"),
            ["workspace_id"],
        ),
        (
            "CreateWorkspaceSession",
            pb.CreateWorkspaceSessionRequest(
                account_id=ACCOUNT, workspace_id="w", session_id="a b"
            ),
            ["session_id"],
        ),
        (
            "ArchiveSession",
            pb.ArchiveSessionRequest(account_id=ACCOUNT, workspace_id="w", session_id=""),
            ["session_id"],
        ),
        ("RecentWorkspace", pb.RecentWorkspaceRequest(account_id="x" * 129), ["account_id"]),
        (
            "FindSessionWorkspace",
            pb.FindSessionWorkspaceRequest(account_id=ACCOUNT, session_id=""),
            ["session_id"],
        ),
    ],
)
async def test_invalid_requests_name_the_violated_fields(
    workspaces: WorkspaceClient,
    stub: pb_grpc.WorkspaceServiceStub,
    method: str,
    request_: object,
    fields: list[str],
) -> None:
    error = await expect_rpc_error(getattr(stub, method)(request_), INVALID)
    assert sorted(set(violated_fields(error))) == fields
    assert await workspaces.list(ACCOUNT) == []


async def test_a_path_the_domain_cannot_canonicalise_is_invalid(
    workspaces: WorkspaceClient, stub: pb_grpc.WorkspaceServiceStub
) -> None:
    error = await expect_rpc_error(
        stub.CreateWorkspace(pb.CreateWorkspaceRequest(account_id=ACCOUNT, path="/src/\0app")),
        INVALID,
    )
    assert reason_of(error) == "INVALID_WORKSPACE_PATH"
    assert violated_fields(error) == ["path"]
    with pytest.raises(InvalidWorkspacePath):
        await workspaces.create(ACCOUNT, "/src/\0app")
    assert await workspaces.list(ACCOUNT) == []


async def test_only_an_existing_folder_other_than_the_root_becomes_a_workspace(
    workspaces: WorkspaceClient, stub: pb_grpc.WorkspaceServiceStub, folders: Folders
) -> None:
    project = Path(folders("/src/app"))
    (project / "README.md").write_text("a file, not a folder\n")
    refused = {
        "/": "is the root of the file system",
        "/tmp/..": "is the root of the file system",
        str(project / "missing"): "does not exist",
        str(project / "README.md"): "is not a directory",
        str(project / "README.md" / "below"): "does not exist",
    }
    for path, why in refused.items():
        error = await expect_rpc_error(stub.CreateWorkspace(_create(ACCOUNT, path)), INVALID)
        assert reason_of(error) == "INVALID_WORKSPACE_PATH", path
        assert violated_fields(error) == ["path"]
        assert why in (error.details() or ""), error.details()
    assert await workspaces.list(ACCOUNT) == []

    workspace, created = await workspaces.create(ACCOUNT, f"{project}/")
    assert created and workspace.path == str(project)


async def test_a_refused_path_of_4_kib_still_fits_the_answer(
    stub: pb_grpc.WorkspaceServiceStub,
) -> None:
    """The answer echoes a shortened path: quoted in full, 4 KiB of control
    characters would pass the 16 KiB a default client takes in trailers and
    arrive as RESOURCE_EXHAUSTED instead."""
    error = await expect_rpc_error(
        stub.CreateWorkspace(_create(ACCOUNT, "/" + "\x01" * 4095)), INVALID
    )
    assert reason_of(error) == "INVALID_WORKSPACE_PATH"
    assert violated_fields(error) == ["path"]
