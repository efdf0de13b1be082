"""RecentWorkspace: where the global "New Session" button lands. The latest
`updated_at` of a workspace's sessions, else its `created_at`; ties keep
list order; nothing without workspaces.

The session log and the workspaces share one hand-moved clock here, so
timestamps (and ties) are exact."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.sessionlog.domain import SessionLog
from services.sessionlog.sqlite_store import SqliteSessionStore
from services.workspace.domain import Workspaces
from services.workspace.store import WorkspaceStore
from tests.support.folders import Folders

from .conftest import ManualClock, plan_mode_event, prompt_events


@pytest.fixture
async def timed_log(log_path: Path, clock: ManualClock) -> AsyncIterator[SessionLog]:
    sessions = SqliteSessionStore(log_path)
    await sessions.open()
    try:
        yield SessionLog(sessions, clock)
    finally:
        await sessions.close()


@pytest.fixture
def timed(timed_log: SessionLog, store: WorkspaceStore, clock: ManualClock) -> Workspaces:
    return Workspaces(timed_log, store, clock)


async def recent_path(workspaces: Workspaces) -> str | None:
    recent = await workspaces.recent("acct")
    return None if recent is None else recent.path


async def test_no_workspaces_means_no_recent_workspace(timed: Workspaces) -> None:
    assert await timed.recent("acct") is None


async def test_without_sessions_the_newest_workspace_wins(
    timed: Workspaces, clock: ManualClock, folders: Folders
) -> None:
    await timed.create_workspace("acct", folders("/old"))
    clock.advance()
    await timed.create_workspace("acct", folders("/new"))

    assert await recent_path(timed) == folders("/new")


async def test_the_workspace_with_the_latest_session_activity_wins(
    timed: Workspaces, timed_log: SessionLog, clock: ManualClock, folders: Folders
) -> None:
    old, _ = await timed.create_workspace("acct", folders("/old"))
    session = await timed.create_session("acct", old.id)
    clock.advance()
    await timed.create_workspace("acct", folders("/new"))
    assert await recent_path(timed) == folders("/new")

    clock.advance()
    await timed_log.append(session.id, prompt_events())

    assert await recent_path(timed) == folders("/old")


async def test_a_workspace_without_sessions_competes_with_its_creation_time(
    timed: Workspaces, timed_log: SessionLog, clock: ManualClock, folders: Folders
) -> None:
    busy, _ = await timed.create_workspace("acct", folders("/busy"))
    session = await timed.create_session("acct", busy.id)
    await timed_log.append(session.id, prompt_events())
    clock.advance()
    await timed.create_workspace("acct", folders("/fresh"))

    assert await recent_path(timed) == folders("/fresh")


async def test_activity_after_a_newer_workspace_was_created_wins_back(
    timed: Workspaces, timed_log: SessionLog, clock: ManualClock, folders: Folders
) -> None:
    busy, _ = await timed.create_workspace("acct", folders("/busy"))
    session = await timed.create_session("acct", busy.id)
    clock.advance()
    await timed.create_workspace("acct", folders("/fresh"))
    clock.advance()
    await timed_log.append(session.id, [plan_mode_event()])

    assert await recent_path(timed) == folders("/busy")


async def test_a_blank_session_made_by_connect_counts_as_activity(
    timed: Workspaces, clock: ManualClock, folders: Folders
) -> None:
    first, _ = await timed.create_workspace("acct", folders("/first"))
    clock.advance()
    await timed.create_workspace("acct", folders("/second"))
    clock.advance()

    await timed.connect("acct", first.id)

    assert await recent_path(timed) == folders("/first")


async def test_archived_sessions_do_not_count(
    timed: Workspaces, clock: ManualClock, folders: Folders
) -> None:
    first, _ = await timed.create_workspace("acct", folders("/first"))
    clock.advance()
    await timed.create_workspace("acct", folders("/second"))
    clock.advance()
    session = await timed.create_session("acct", first.id)
    assert await recent_path(timed) == folders("/first")

    await timed.set_archived("acct", first.id, session.id)

    assert await recent_path(timed) == folders("/second")


async def test_workspaces_created_at_the_same_time_tie_to_the_first(
    timed: Workspaces, folders: Folders
) -> None:
    for path in (folders("/b"), folders("/a"), folders("/c")):
        await timed.create_workspace("acct", path)

    assert await recent_path(timed) == folders("/b")


async def test_a_tie_between_sessions_goes_to_the_first_workspace(
    timed: Workspaces, timed_log: SessionLog, clock: ManualClock, folders: Folders
) -> None:
    first, _ = await timed.create_workspace("acct", folders("/first"))
    second, _ = await timed.create_workspace("acct", folders("/second"))
    clock.advance()
    # Created in the opposite order, updated at the same instant.
    later = await timed.create_session("acct", second.id)
    earlier = await timed.create_session("acct", first.id)
    await timed_log.append(later.id, prompt_events())
    await timed_log.append(earlier.id, prompt_events())

    assert await recent_path(timed) == folders("/first")


async def test_a_tie_between_a_session_and_a_creation_time_goes_to_the_first_workspace(
    timed: Workspaces, clock: ManualClock, folders: Folders
) -> None:
    await timed.create_workspace("acct", folders("/first"))  # no sessions: its created_at counts
    clock.now_us -= 5_000_000  # the next workspace is older by its clock...
    second, _ = await timed.create_workspace("acct", folders("/second"))
    clock.advance(5)
    await timed.create_session("acct", second.id)  # ...but active at the same instant

    assert await recent_path(timed) == folders("/first")


async def test_the_latest_session_of_a_workspace_is_the_one_that_counts(
    timed: Workspaces, timed_log: SessionLog, clock: ManualClock, folders: Folders
) -> None:
    many, _ = await timed.create_workspace("acct", folders("/many"))
    old = await timed.create_session("acct", many.id)
    await timed_log.append(old.id, prompt_events())
    clock.advance(10)
    await timed.create_workspace("acct", folders("/other"))
    clock.advance(10)
    await timed.create_session("acct", many.id)

    assert await recent_path(timed) == folders("/many")
    recent = await timed.recent("acct")
    assert recent is not None and recent.id == many.id and len(recent.session_ids) == 2
