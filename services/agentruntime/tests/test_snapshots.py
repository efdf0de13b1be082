"""The shadow repository's snapshots: a folder's state as a tree, whoever
changed it (two runtimes' sessions may share a folder and its repository)."""

from __future__ import annotations

from pathlib import Path

from services.agentruntime.capabilities.checkpoints.snapshots import EMPTY_TREE, ShadowRepo


def repos(tmp_path: Path, count: int) -> tuple[Path, list[ShadowRepo]]:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder, [ShadowRepo(tmp_path / "shadow", folder) for _ in range(count)]


async def test_an_unchanged_folder_gives_the_same_tree_and_an_empty_change_list(
    tmp_path: Path,
) -> None:
    folder, (repo,) = repos(tmp_path, 1)
    assert await repo.snapshot() == EMPTY_TREE
    (folder / "notes.txt").write_text("one\n")
    first = await repo.snapshot()

    again = await repo.snapshot()

    assert again == first != EMPTY_TREE
    assert await repo.changes(first, again) == []


async def test_a_change_recorded_through_another_repository_object_is_seen(
    tmp_path: Path,
) -> None:
    folder, (mine, theirs) = repos(tmp_path, 2)
    (folder / "notes.txt").write_text("one\n")
    before = await mine.snapshot()
    (folder / "notes.txt").write_text("one\ntwo\n")

    recorded_elsewhere = await theirs.snapshot()
    # The folder now matches the shared index: only the index says it moved on.
    after = await mine.snapshot()

    assert after == recorded_elsewhere != before
    assert [(c.path, c.change, c.lines_added) for c in await mine.changes(before, after)] == [
        ("notes.txt", "modified", 1)
    ]
