"""The workspace store on every backend (SQLite file, PostgreSQL schema):
workspaces per account, memberships, and what a restart keeps. The domain
rules on top (services/workspace/tests) run on both backends too."""

from __future__ import annotations

import asyncio

from services.workspace.store import Membership, WorkspaceRecord, WorkspaceStore
from tests.support.stores import StoreBackend


def workspace(workspace_id: str, account: str = "acct", path: str = "/src/app") -> WorkspaceRecord:
    return WorkspaceRecord(workspace_id, account, path, 1_000)


def member(session_id: str, workspace_id: str = "w1", archived: bool = False) -> Membership:
    return Membership(workspace_id, session_id, "/src/app", archived, 2_000)


async def test_a_second_workspace_at_an_accounts_path_returns_the_first(
    workspace_store: WorkspaceStore,
) -> None:
    first, created = await workspace_store.add_workspace(workspace("w1"))
    again, created_again = await workspace_store.add_workspace(workspace("w2"))

    assert created and first == workspace("w1")
    assert not created_again and again == first
    assert await workspace_store.get_workspace("w2") is None


async def test_workspaces_list_per_account_in_creation_order(
    workspace_store: WorkspaceStore,
) -> None:
    for record in (
        workspace("w1", path="/b"),
        workspace("w2", "other", "/b"),
        workspace("w3", path="/a"),
    ):
        await workspace_store.add_workspace(record)

    assert [w.id for w in await workspace_store.list_workspaces("acct")] == ["w1", "w3"]
    assert [w.id for w in await workspace_store.list_workspaces("other")] == ["w2"]
    assert await workspace_store.list_workspaces("nobody") == []
    assert await workspace_store.get_workspace("w2") == workspace("w2", "other", "/b")


async def test_racing_creates_of_one_path_keep_one_workspace(
    workspace_store: WorkspaceStore,
) -> None:
    results = await asyncio.gather(
        *(workspace_store.add_workspace(workspace(f"w{n}")) for n in range(8))
    )

    assert sum(created for _, created in results) == 1
    assert len({stored.id for stored, _ in results}) == 1
    assert len(await workspace_store.list_workspaces("acct")) == 1


async def test_a_session_is_a_member_of_one_workspace_at_most(
    workspace_store: WorkspaceStore,
) -> None:
    await workspace_store.add_workspace(workspace("w1"))
    await workspace_store.add_workspace(workspace("w2", "other"))

    stored, added = await workspace_store.add_membership(member("s1"))
    kept, added_again = await workspace_store.add_membership(member("s1", "w2"))

    assert added and stored == member("s1")
    assert not added_again and kept == member("s1")
    assert await workspace_store.get_membership("s1") == member("s1")
    assert await workspace_store.get_membership("s2") is None


async def test_memberships_list_in_joining_order_archived_included(
    workspace_store: WorkspaceStore,
) -> None:
    for record in (workspace("w1"), workspace("w2", path="/b"), workspace("w3", path="/c")):
        await workspace_store.add_workspace(record)
    for m in (member("s1", "w2"), member("s2", "w1"), member("s3", "w2"), member("s4", "w3")):
        await workspace_store.add_membership(m)
    await workspace_store.set_archived("s3", True)

    listed = await workspace_store.list_memberships(["w1", "w2"])

    assert [(m.session_id, m.archived) for m in listed] == [
        ("s1", False),
        ("s2", False),
        ("s3", True),
    ]
    assert await workspace_store.list_memberships([]) == []
    await workspace_store.set_archived("s3", False)
    assert (await workspace_store.get_membership("s3")) == member("s3", "w2")


async def test_only_an_empty_workspace_is_removed(workspace_store: WorkspaceStore) -> None:
    await workspace_store.add_workspace(workspace("w1"))
    await workspace_store.add_membership(member("s1"))
    await workspace_store.set_archived("s1", True)

    assert not await workspace_store.remove_workspace_if_empty("w1")  # an archived member counts
    await workspace_store.remove_membership("s1")
    assert await workspace_store.remove_workspace_if_empty("w1")
    assert await workspace_store.get_workspace("w1") is None
    assert not await workspace_store.remove_workspace_if_empty("w1")


async def test_workspaces_and_members_survive_a_restart(
    workspace_backend: StoreBackend[WorkspaceStore],
) -> None:
    async with workspace_backend.opened() as store:
        await store.add_workspace(workspace("w1"))
        await store.add_membership(member("s1", archived=True))

    async with workspace_backend.opened() as store:
        assert await store.list_workspaces("acct") == [workspace("w1")]
        assert await store.list_memberships(["w1"]) == [member("s1", archived=True)]


async def test_replicas_racing_on_one_path_and_one_session_keep_the_first(
    workspace_backend: StoreBackend[WorkspaceStore],
) -> None:
    async with workspace_backend.opened() as one, workspace_backend.opened() as two:
        made = await asyncio.gather(
            *(replica.add_workspace(workspace(f"w{n}")) for n, replica in enumerate((one, two)))
        )
        (stored, _), _ = made
        joined = await asyncio.gather(
            *(replica.add_membership(member("s1", stored.id)) for replica in (one, two))
        )

        assert [created for _, created in made].count(True) == 1
        assert made[0][0] == made[1][0]
        assert [added for _, added in joined].count(True) == 1
        assert await two.list_memberships([stored.id]) == [member("s1", stored.id)]
