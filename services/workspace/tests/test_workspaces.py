"""Creating, reading and listing workspaces, their sessions, archiving, and
account scoping (another account's workspace is simply not there)."""

from __future__ import annotations

import asyncio

import pytest

from services.common.errors import SessionConflict, SessionNotFound
from services.sessionlog.domain import SessionLog
from services.workspace.domain import Workspaces
from services.workspace.errors import SessionTaken, WorkspaceNotFound
from services.workspace.store import WorkspaceStore
from tests.support.folders import Folders
from tests.support.stores import StoreBackend

from .conftest import ManualClock, prompt_events


async def test_create_returns_the_existing_workspace_for_the_same_path(
    workspaces: Workspaces, clock: ManualClock, folders: Folders
) -> None:
    created, was_created = await workspaces.create_workspace("acct", folders("/src/app"))
    clock.advance()
    again, was_created_again = await workspaces.create_workspace("acct", folders("/src/app"))

    assert was_created and not was_created_again
    assert again == created
    assert created.path == folders("/src/app")
    assert created.created_at_us == clock.now_us - 1_000_000
    assert created.session_ids == () and created.archived_session_ids == ()


async def test_list_is_in_creation_order_and_get_matches(
    workspaces: Workspaces, folders: Folders
) -> None:
    paths = [folders("/z"), folders("/a"), folders("/m")]
    created = [(await workspaces.create_workspace("acct", p))[0] for p in paths]

    listed = await workspaces.list_workspaces("acct")

    assert [w.path for w in listed] == paths
    assert [await workspaces.get_workspace("acct", w.id) for w in created] == listed


async def test_workspace_converts_to_its_proto(workspaces: Workspaces, folders: Folders) -> None:
    workspace, _ = await workspaces.create_workspace("acct", folders("/src/app"))
    session = await workspaces.create_session("acct", workspace.id)
    workspace = await workspaces.set_archived("acct", workspace.id, session.id)
    kept = await workspaces.create_session("acct", workspace.id)
    workspace = await workspaces.get_workspace("acct", workspace.id)

    message = workspace.to_proto()

    assert message.id == workspace.id and message.account_id == "acct"
    assert message.path == folders("/src/app")
    assert message.created_at.ToMicroseconds() == workspace.created_at_us
    assert list(message.session_ids) == [kept.id]
    assert list(message.archived_session_ids) == [session.id]


async def test_workspaces_survive_a_restart_of_the_workspace_service(
    log: SessionLog,
    workspace_backend: StoreBackend[WorkspaceStore],
    clock: ManualClock,
    folders: Folders,
) -> None:
    async with workspace_backend.opened() as store:
        before = Workspaces(log, store, clock)
        first, _ = await before.create_workspace("acct", folders("/one"))
        await before.create_workspace("acct", folders("/two"))
        session = await before.create_session("acct", first.id)
        await log.append(session.id, prompt_events())
        listed_before = await before.list_workspaces("acct")

    async with workspace_backend.opened() as store:
        after = Workspaces(log, store, clock)

        assert await after.list_workspaces("acct") == listed_before
        assert (await after.get_workspace("acct", first.id)).session_ids == (session.id,)


# -- sessions -------------------------------------------------------------------


async def test_create_session_always_makes_a_new_session(
    workspaces: Workspaces, log: SessionLog, folders: Folders
) -> None:
    workspace, _ = await workspaces.create_workspace("acct", folders("/src/app"))

    first = await workspaces.create_session("acct", workspace.id)
    second = await workspaces.create_session("acct", workspace.id)

    assert first.id != second.id
    assert first.blank and second.blank  # the first was reusable, yet not reused
    assert first.cwd == second.cwd == folders("/src/app")
    assert (await log.get_session(second.id)).cwd == folders("/src/app")
    workspace = await workspaces.get_workspace("acct", workspace.id)
    assert workspace.session_ids == (first.id, second.id)


async def test_create_session_with_a_chosen_id_is_idempotent(
    workspaces: Workspaces, folders: Folders
) -> None:
    workspace, _ = await workspaces.create_workspace("acct", folders("/src/app"))

    first = await workspaces.create_session("acct", workspace.id, "s-chosen")
    retried = await workspaces.create_session("acct", workspace.id, "s-chosen")

    assert first.id == retried.id == "s-chosen"
    assert (await workspaces.get_workspace("acct", workspace.id)).session_ids == ("s-chosen",)


async def test_a_chosen_id_of_a_session_outside_the_workspace_is_refused(
    workspaces: Workspaces, log: SessionLog, folders: Folders
) -> None:
    workspace, _ = await workspaces.create_workspace("acct", folders("/src/app"))
    await log.create_session("s-cli", folders("/src/app"))  # e.g. a CLI session in that directory

    with pytest.raises(SessionConflict) as refused:
        await workspaces.create_session("acct", workspace.id, "s-cli")

    assert refused.value.reason == "SESSION_CONFLICT"
    assert (await workspaces.get_workspace("acct", workspace.id)).session_ids == ()
    assert await workspaces.find_session_workspace("acct", "s-cli") is None


async def test_a_chosen_id_used_in_another_workspace_is_refused(
    workspaces: Workspaces, folders: Folders
) -> None:
    one, _ = await workspaces.create_workspace("acct", folders("/one"))
    two, _ = await workspaces.create_workspace("acct", folders("/two"))
    await workspaces.create_session("acct", one.id, "s-taken")

    with pytest.raises(SessionConflict):
        await workspaces.create_session("acct", two.id, "s-taken")

    assert (await workspaces.get_workspace("acct", two.id)).session_ids == ()
    assert (await workspaces.get_workspace("acct", one.id)).session_ids == ("s-taken",)


async def test_create_at_a_path_makes_the_workspace_once_and_retries_return_the_session(
    workspaces: Workspaces, folders: Folders
) -> None:
    workspace_id, first = await workspaces.create_session_at(
        "acct", folders("/src/app"), "s-chosen"
    )
    again_id, again = await workspaces.create_session_at(
        "acct", folders("/src/app") + "/", "s-chosen"
    )
    _, other = await workspaces.create_session_at("acct", folders("/src/app"))

    assert again_id == workspace_id and again.id == first.id == "s-chosen"
    listed = await workspaces.list_workspaces("acct")
    assert [(w.id, w.session_ids) for w in listed] == [(workspace_id, ("s-chosen", other.id))]


async def test_a_refused_create_at_a_new_path_leaves_no_workspace(
    workspaces: Workspaces, log: SessionLog, folders: Folders
) -> None:
    await workspaces.create_session_at("acct", folders("/one"), "s-taken")
    await workspaces.create_session_at("stranger", folders("/theirs"), "s-theirs")
    await log.create_session("s-cli", folders("/src/cli"))  # outside any workspace

    for taken in ("s-taken", "s-theirs", "s-cli"):
        with pytest.raises(SessionConflict):
            await workspaces.create_session_at("acct", folders("/new"), taken)

    assert [w.path for w in await workspaces.list_workspaces("acct")] == [folders("/one")]


async def test_racing_creates_of_one_id_in_two_new_paths_leave_one_workspace(
    workspaces: Workspaces, folders: Folders
) -> None:
    results = await asyncio.gather(
        workspaces.create_session_at("acct", folders("/one"), "s-raced"),
        workspaces.create_session_at("acct", folders("/two"), "s-raced"),
        return_exceptions=True,
    )

    (won,) = [r for r in results if not isinstance(r, BaseException)]
    assert [type(r) for r in results if isinstance(r, BaseException)] == [SessionTaken]
    listed = await workspaces.list_workspaces("acct")
    assert [(w.id, w.session_ids) for w in listed] == [(won[0], ("s-raced",))]


async def test_archiving_moves_a_session_to_the_archived_list(
    workspaces: Workspaces, folders: Folders
) -> None:
    workspace, _ = await workspaces.create_workspace("acct", folders("/src/app"))
    kept = await workspaces.create_session("acct", workspace.id)
    archived = await workspaces.create_session("acct", workspace.id)

    result = await workspaces.set_archived("acct", workspace.id, archived.id)
    twice = await workspaces.set_archived("acct", workspace.id, archived.id)

    assert result.session_ids == (kept.id,)
    assert result.archived_session_ids == (archived.id,)
    assert twice == result == await workspaces.get_workspace("acct", workspace.id)


async def test_archiving_a_session_that_is_not_a_member_fails(
    workspaces: Workspaces, folders: Folders
) -> None:
    one, _ = await workspaces.create_workspace("acct", folders("/one"))
    two, _ = await workspaces.create_workspace("acct", folders("/two"))
    elsewhere = await workspaces.create_session("acct", two.id)

    for session_id in ("s-unknown", elsewhere.id):
        with pytest.raises(SessionNotFound):
            await workspaces.set_archived("acct", one.id, session_id)

    assert (await workspaces.get_workspace("acct", two.id)).session_ids == (elsewhere.id,)


async def test_find_session_workspace_names_the_owning_workspace(
    workspaces: Workspaces, log: SessionLog, folders: Folders
) -> None:
    await workspaces.create_workspace("acct", folders("/one"))
    two, _ = await workspaces.create_workspace("acct", folders("/two"))
    session = await workspaces.create_session("acct", two.id)
    archived = await workspaces.create_session("acct", two.id)
    await workspaces.set_archived("acct", two.id, archived.id)
    outside, _ = await log.create_session(None, folders("/two"))

    found = await workspaces.find_session_workspace("acct", session.id)
    found_archived = await workspaces.find_session_workspace("acct", archived.id)

    assert found is not None and found.id == two.id
    assert found_archived is not None and found_archived.id == two.id
    assert await workspaces.find_session_workspace("acct", outside.id) is None
    assert await workspaces.find_session_workspace("acct", "s-unknown") is None
    # The access check asks the same, and answers the same.
    for session_id, owned in [(session.id, True), (archived.id, True), (outside.id, False)]:
        assert await workspaces.owns_session("acct", session_id) is owned
        assert await workspaces.owns_session("bob", session_id) is False
    assert await workspaces.owns_session("acct", "s-unknown") is False


# -- account scoping ----------------------------------------------------------------


async def test_accounts_do_not_see_each_others_workspaces(
    workspaces: Workspaces, folders: Folders
) -> None:
    mine, _ = await workspaces.create_workspace("alice", folders("/src/app"))
    theirs, created = await workspaces.create_workspace("bob", folders("/src/app"))
    session = await workspaces.create_session("alice", mine.id)

    assert created and theirs.id != mine.id
    assert [w.id for w in await workspaces.list_workspaces("alice")] == [mine.id]
    assert [w.id for w in await workspaces.list_workspaces("bob")] == [theirs.id]
    assert await workspaces.find_session_workspace("bob", session.id) is None
    recent = await workspaces.recent("bob")
    assert recent is not None and recent.id == theirs.id


async def test_another_accounts_workspace_is_not_found_for_every_operation(
    workspaces: Workspaces,
    folders: Folders,
) -> None:
    mine, _ = await workspaces.create_workspace("alice", folders("/src/app"))
    session = await workspaces.create_session("alice", mine.id)
    attempts = [
        workspaces.get_workspace("bob", mine.id),
        workspaces.connect("bob", mine.id),
        workspaces.create_session("bob", mine.id),
        workspaces.set_archived("bob", mine.id, session.id),
    ]

    for attempt in attempts:
        with pytest.raises(WorkspaceNotFound) as refused:
            await attempt
        # Exactly what an unknown id answers: no hint that it exists.
        assert refused.value.reason == "WORKSPACE_NOT_FOUND"
        assert refused.value.message == f"workspace {mine.id!r} not found"

    untouched = await workspaces.get_workspace("alice", mine.id)
    assert untouched.session_ids == (session.id,) and untouched.archived_session_ids == ()


async def test_another_account_cannot_claim_a_session_in_the_same_directory(
    workspaces: Workspaces,
    folders: Folders,
) -> None:
    mine, _ = await workspaces.create_workspace("alice", folders("/src/app"))
    theirs, _ = await workspaces.create_workspace("bob", folders("/src/app"))
    session = await workspaces.create_session("alice", mine.id)

    with pytest.raises(SessionConflict):
        await workspaces.create_session("bob", theirs.id, session.id)

    assert (await workspaces.get_workspace("bob", theirs.id)).session_ids == ()
    assert await workspaces.find_session_workspace("bob", session.id) is None


async def test_an_account_without_workspaces_lists_nothing(
    workspaces: Workspaces, folders: Folders
) -> None:
    await workspaces.create_workspace("alice", folders("/src/app"))

    assert await workspaces.list_workspaces("bob") == []
    assert await workspaces.recent("bob") is None


async def test_an_archived_member_comes_back_when_unarchived(
    workspaces: Workspaces, folders: Folders
) -> None:
    workspace, _ = await workspaces.create_workspace("acct", folders("/src/app"))
    session = await workspaces.create_session("acct", workspace.id)
    await workspaces.set_archived("acct", workspace.id, session.id)
    back = await workspaces.set_archived("acct", workspace.id, session.id, False)
    assert back.session_ids == (session.id,) and back.archived_session_ids == ()


async def test_an_existing_session_joins_and_leaves_a_workspace(
    workspaces: Workspaces, log: SessionLog, folders: Folders
) -> None:
    workspace, _ = await workspaces.create_workspace("acct", folders("/src/app"))
    other, _ = await workspaces.create_workspace("acct", folders("/src/other"))
    source = await workspaces.create_session("acct", workspace.id)
    await log.append(source.id, prompt_events("hello"))
    fork = await log.fork(source.id)
    joined = await workspaces.add_session("acct", workspace.id, fork.id)
    assert joined.session_ids == (source.id, fork.id)
    assert (await workspaces.add_session("acct", workspace.id, fork.id)) == joined
    with pytest.raises(SessionTaken):
        await workspaces.add_session("acct", other.id, fork.id)
    with pytest.raises(WorkspaceNotFound):
        await workspaces.add_session("bob", workspace.id, fork.id)

    await workspaces.remove_session("bob", fork.id)  # not bob's: nothing happens
    assert (await workspaces.find_session_workspace("acct", fork.id)) is not None
    await workspaces.remove_session("acct", fork.id)
    assert (await workspaces.find_session_workspace("acct", fork.id)) is None
