"""ConnectWorkspace: the session "New Session" lands in. A blank member is
reused; anything else gets a new session in the workspace."""

from __future__ import annotations

import asyncio

import pytest

from services.sessionlog.domain import SessionLog
from services.workspace.domain import Workspace, Workspaces
from services.workspace.errors import WorkspaceNotFound
from services.workspace.store import WorkspaceStore
from tests.support.folders import Folders

from .conftest import plan_mode_event, prompt_events


@pytest.fixture
async def workspace(workspaces: Workspaces, folders: Folders) -> Workspace:
    created, _ = await workspaces.create_workspace("acct", folders("/src/app"))
    return created


async def members(workspaces: Workspaces, workspace: Workspace) -> tuple[str, ...]:
    return (await workspaces.get_workspace("acct", workspace.id)).session_ids


async def test_the_first_connect_creates_a_blank_session_in_the_workspace(
    workspaces: Workspaces, workspace: Workspace, log: SessionLog, folders: Folders
) -> None:
    session, reused = await workspaces.connect("acct", workspace.id)

    assert not reused
    assert session.blank and session.cwd == folders("/src/app")
    assert (await log.get_session(session.id)).cwd == folders("/src/app")
    assert await members(workspaces, workspace) == (session.id,)


async def test_a_blank_member_is_reused_without_creating_anything(
    workspaces: Workspaces, workspace: Workspace
) -> None:
    first, _ = await workspaces.connect("acct", workspace.id)

    again, reused = await workspaces.connect("acct", workspace.id)

    assert reused and again.id == first.id
    assert await members(workspaces, workspace) == (first.id,)


async def test_a_blank_session_created_with_create_session_is_reused(
    workspaces: Workspaces, workspace: Workspace
) -> None:
    created = await workspaces.create_session("acct", workspace.id)

    session, reused = await workspaces.connect("acct", workspace.id)

    assert reused and session.id == created.id


async def test_a_blank_session_with_the_same_cwd_that_is_not_a_member_is_not_reused(
    workspaces: Workspaces, workspace: Workspace, log: SessionLog, folders: Folders
) -> None:
    # A session made outside the workspace (say by the CLI) in the same
    # directory; durable, so it shows in lists, and still blank.
    outsider, _ = await log.create_session(None, folders("/src/app"))
    await log.append(outsider.id, [plan_mode_event()])
    assert (await log.get_session(outsider.id)).blank

    session, reused = await workspaces.connect("acct", workspace.id)

    assert not reused and session.id != outsider.id
    assert await members(workspaces, workspace) == (session.id,)


async def test_an_archived_blank_member_is_not_reused(
    workspaces: Workspaces, workspace: Workspace
) -> None:
    archived, _ = await workspaces.connect("acct", workspace.id)
    await workspaces.set_archived("acct", workspace.id, archived.id)

    session, reused = await workspaces.connect("acct", workspace.id)

    assert not reused and session.id != archived.id
    assert await members(workspaces, workspace) == (session.id,)


async def test_a_session_with_an_accepted_prompt_is_not_reused(
    workspaces: Workspaces, workspace: Workspace, log: SessionLog
) -> None:
    used, _ = await workspaces.connect("acct", workspace.id)
    await log.append(used.id, prompt_events(), expected_last_seq=-1)

    session, reused = await workspaces.connect("acct", workspace.id)

    assert not reused and session.id != used.id and session.blank
    assert await members(workspaces, workspace) == (used.id, session.id)


async def test_a_session_with_only_plan_mode_events_stays_reusable(
    workspaces: Workspaces, workspace: Workspace, log: SessionLog
) -> None:
    planned, _ = await workspaces.connect("acct", workspace.id)
    await log.append(planned.id, [plan_mode_event(True)])
    await log.append(planned.id, [plan_mode_event(False)])

    session, reused = await workspaces.connect("acct", workspace.id)

    assert reused and session.id == planned.id
    assert session.last_seq == 1  # the durable session, with its events


async def test_the_newest_of_several_reusable_members_is_chosen(
    workspaces: Workspaces, workspace: Workspace
) -> None:
    await workspaces.create_session("acct", workspace.id)
    await workspaces.create_session("acct", workspace.id)
    newest = await workspaces.create_session("acct", workspace.id)

    picks = {(await workspaces.connect("acct", workspace.id))[0].id for _ in range(3)}

    assert picks == {newest.id}


async def test_ten_concurrent_connects_share_one_new_session(
    workspaces: Workspaces, workspace: Workspace
) -> None:
    results = await asyncio.gather(*(workspaces.connect("acct", workspace.id) for _ in range(10)))

    assert len({session.id for session, _ in results}) == 1
    assert await members(workspaces, workspace) == (results[0][0].id,)


async def test_concurrent_connects_to_different_workspaces_do_not_share(
    workspaces: Workspaces, workspace: Workspace, folders: Folders
) -> None:
    other, _ = await workspaces.create_workspace("acct", folders("/src/other"))

    (here, _), (there, _) = await asyncio.gather(
        workspaces.connect("acct", workspace.id), workspaces.connect("acct", other.id)
    )

    assert here.id != there.id
    assert (here.cwd, there.cwd) == (folders("/src/app"), folders("/src/other"))


async def test_an_unknown_workspace_fails_and_creates_nothing(
    workspaces: Workspaces,
    workspace: Workspace,
    log: SessionLog,
    store: WorkspaceStore,
) -> None:
    await workspaces.connect("acct", workspace.id)
    sessions_before = await log.list_sessions()

    with pytest.raises(WorkspaceNotFound) as refused:
        await workspaces.connect("acct", "w-unknown")

    assert refused.value.reason == "WORKSPACE_NOT_FOUND"
    assert refused.value.status == "NOT_FOUND"
    assert await log.list_sessions() == sessions_before
    assert await store.list_memberships(["w-unknown"]) == []
    assert len(await members(workspaces, workspace)) == 1
