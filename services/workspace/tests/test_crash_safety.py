"""Session creation is two writes (membership here, session in the log);
crashes between them and session-log restarts must never leave a member that
does not resolve, nor a session its workspace does not show.

Each state is built for real: rows written through the real store, a real
session log that is down or restarted on the same SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from services.common.errors import SessionNotFound
from services.sessionlog.domain import SessionLog, open_session_log
from services.workspace.domain import Workspace, Workspaces
from services.workspace.store import Membership, WorkspaceStore, open_workspace_store
from tests.support.folders import Folders

from .conftest import ManualClock, plan_mode_event, prompt_events


@pytest.fixture
async def workspace(workspaces: Workspaces, folders: Folders) -> Workspace:
    created, _ = await workspaces.create_workspace("acct", folders("/src/app"))
    return created


async def crash_after_membership(
    store: WorkspaceStore, workspace: Workspace, session_id: str, clock: ManualClock
) -> None:
    """What step 1 of session creation leaves when the process dies before
    step 2: the membership, and nothing in the session log."""
    _, added = await store.add_membership(
        Membership(workspace.id, session_id, workspace.path, False, clock())
    )
    assert added


# -- crash between the membership and the session-log create ------------------------


async def test_a_member_whose_session_was_never_created_shows_and_resolves(
    workspaces: Workspaces,
    workspace: Workspace,
    store: WorkspaceStore,
    log: SessionLog,
    clock: ManualClock,
    folders: Folders,
) -> None:
    await crash_after_membership(store, workspace, "s-orphan", clock)

    shown = await workspaces.get_workspace("acct", workspace.id)

    assert shown.session_ids == ("s-orphan",)
    session = await log.get_session("s-orphan")  # the id a client sees works
    assert session.cwd == folders("/src/app") and session.blank
    await log.append("s-orphan", prompt_events(), expected_last_seq=-1)


async def test_connect_reuses_a_member_whose_session_was_never_created(
    workspaces: Workspaces,
    workspace: Workspace,
    store: WorkspaceStore,
    clock: ManualClock,
) -> None:
    await crash_after_membership(store, workspace, "s-orphan", clock)

    session, reused = await workspaces.connect("acct", workspace.id)

    assert reused and session.id == "s-orphan" and session.blank
    assert (await workspaces.get_workspace("acct", workspace.id)).session_ids == ("s-orphan",)


async def test_find_and_recent_resolve_a_member_whose_session_was_never_created(
    workspaces: Workspaces,
    workspace: Workspace,
    store: WorkspaceStore,
    log: SessionLog,
    clock: ManualClock,
    folders: Folders,
) -> None:
    await crash_after_membership(store, workspace, "s-orphan", clock)

    found = await workspaces.find_session_workspace("acct", "s-orphan")
    recent = await workspaces.recent("acct")

    assert found is not None and found.id == workspace.id
    assert recent is not None and recent.session_ids == ("s-orphan",)
    assert (await log.get_session("s-orphan")).cwd == folders("/src/app")


async def test_an_access_check_resolves_its_own_session_and_no_other(
    workspaces: Workspaces,
    workspace: Workspace,
    store: WorkspaceStore,
    log: SessionLog,
    clock: ManualClock,
    folders: Folders,
) -> None:
    await crash_after_membership(store, workspace, "s-orphan", clock)
    await crash_after_membership(store, workspace, "s-checked", clock)

    assert await workspaces.owns_session("acct", "s-checked")

    assert (await log.get_session("s-checked")).cwd == folders("/src/app")
    # The other member was not read: its repair waits for a read of the workspace.
    with pytest.raises(SessionNotFound):
        await log.get_session("s-orphan")


async def test_a_session_log_that_fails_mid_creation_leaves_a_member_that_resolves(
    store: WorkspaceStore, log_path: Path, clock: ManualClock, folders: Folders
) -> None:
    async with open_session_log(log_path) as down:
        workspace, _ = await Workspaces(down, store, clock).create_workspace(
            "acct", folders("/src/app")
        )
    # `down` is closed now: every call fails, as a crashed log would.
    with pytest.raises(RuntimeError):
        await Workspaces(down, store, clock).create_session("acct", workspace.id)

    async with open_session_log(log_path) as log:
        workspaces = Workspaces(log, store, clock)
        shown = await workspaces.get_workspace("acct", workspace.id)
        session, reused = await workspaces.connect("acct", workspace.id)

        assert len(shown.session_ids) == 1
        assert reused and session.id == shown.session_ids[0] and session.cwd == folders("/src/app")
        assert (await log.get_session(session.id)).blank


async def test_a_membership_that_cannot_be_written_creates_no_session(
    log: SessionLog, store_path: Path, clock: ManualClock, folders: Folders
) -> None:
    # SQLite only: another writer holding the file is how this one fails to write.
    async with open_workspace_store(store_path, busy_timeout_ms=50) as store:
        workspaces = Workspaces(log, store, clock)
        workspace, _ = await workspaces.create_workspace("acct", folders("/src/app"))
        # Another writer holds the database: step 1 fails.
        blocker = sqlite3.connect(store_path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(sqlite3.OperationalError):
                await workspaces.create_session("acct", workspace.id, "s-blocked")
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()

        # Step 2 never ran: the log knows nothing the workspace does not show.
        with pytest.raises(SessionNotFound):
            await log.get_session("s-blocked")
        assert (await workspaces.get_workspace("acct", workspace.id)).session_ids == ()
        # The retry succeeds.
        retried = await workspaces.create_session("acct", workspace.id, "s-blocked")
        assert retried.id == "s-blocked"


async def test_a_member_whose_id_the_log_gives_another_cwd_is_dropped(
    workspaces: Workspaces,
    workspace: Workspace,
    store: WorkspaceStore,
    log: SessionLog,
    clock: ManualClock,
    folders: Folders,
) -> None:
    # The log refused our create (the id is someone else's, elsewhere) and we
    # died before removing the membership.
    await log.create_session("s-foreign", folders("/elsewhere"))
    await log.append("s-foreign", prompt_events())
    await crash_after_membership(store, workspace, "s-foreign", clock)

    shown = await workspaces.get_workspace("acct", workspace.id)
    session, reused = await workspaces.connect("acct", workspace.id)

    assert shown.session_ids == ()
    assert await workspaces.find_session_workspace("acct", "s-foreign") is None
    assert not await workspaces.owns_session("acct", "s-foreign")
    assert not reused and session.id != "s-foreign"
    assert await store.get_membership("s-foreign") is None
    assert (await log.get_session("s-foreign")).cwd == folders("/elsewhere")  # untouched


# -- session-log restarts ----------------------------------------------------------


async def test_after_a_session_log_restart_connect_still_returns_a_working_session(
    store: WorkspaceStore, log_path: Path, clock: ManualClock, folders: Folders
) -> None:
    async with open_session_log(log_path) as log:
        workspaces = Workspaces(log, store, clock)
        workspace, _ = await workspaces.create_workspace("acct", folders("/src/app"))
        lazy, _ = await workspaces.connect("acct", workspace.id)

    async with open_session_log(log_path) as log:
        with pytest.raises(SessionNotFound):
            await log.get_session(lazy.id)  # never appended: gone with the restart
        workspaces = Workspaces(log, store, clock)

        session, reused = await workspaces.connect("acct", workspace.id)
        await log.append(session.id, prompt_events(), expected_last_seq=-1)
        listed, _ = await log.list_sessions(session_ids=[session.id])
        after_prompt, reused_after_prompt = await workspaces.connect("acct", workspace.id)

    assert reused and session.id == lazy.id and session.cwd == folders("/src/app")
    assert [s.id for s in listed] == [lazy.id] and not listed[0].blank
    assert not reused_after_prompt and after_prompt.id != lazy.id


async def test_durable_members_keep_their_state_across_a_session_log_restart(
    store: WorkspaceStore, log_path: Path, clock: ManualClock, folders: Folders
) -> None:
    async with open_session_log(log_path) as log:
        workspaces = Workspaces(log, store, clock)
        workspace, _ = await workspaces.create_workspace("acct", folders("/src/app"))
        used = await workspaces.create_session("acct", workspace.id)
        await log.append(used.id, prompt_events())
        planned = await workspaces.create_session("acct", workspace.id)
        await log.append(planned.id, [plan_mode_event()])

    async with open_session_log(log_path) as log:
        workspaces = Workspaces(log, store, clock)
        session, reused = await workspaces.connect("acct", workspace.id)
        shown = await workspaces.get_workspace("acct", workspace.id)

    assert reused and session.id == planned.id and session.last_seq == 0
    assert shown.session_ids == (used.id, planned.id)
