"""One directory, one spelling: symlinks, trailing slashes and `..` do not
make a second workspace; and only an existing folder other than `/` makes one."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.workspace.domain import Workspaces
from services.workspace.errors import InvalidWorkspacePath
from services.workspace.paths import canonical_path, workspace_path


def test_a_symlink_resolves_to_its_target(tmp_path: Path) -> None:
    target = tmp_path / "repo"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)

    assert canonical_path(str(link)) == str(target.resolve())


def test_a_symlink_inside_the_path_resolves_too(tmp_path: Path) -> None:
    (tmp_path / "real" / "pkg").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(tmp_path / "real")

    assert canonical_path(f"{tmp_path}/alias/pkg") == str((tmp_path / "real" / "pkg").resolve())


def test_trailing_and_repeated_slashes_are_removed(tmp_path: Path) -> None:
    real = str(tmp_path.resolve())

    assert canonical_path(real + "/") == real
    assert canonical_path(real + "///") == real
    assert canonical_path(real.replace("/", "//")) == real


def test_dot_segments_are_resolved(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    real = str(tmp_path.resolve())

    assert canonical_path(f"{real}/a/./../a/") == f"{real}/a"


def test_the_root_stays_the_root() -> None:
    assert canonical_path("/") == "/"
    assert canonical_path("//") == "/"


def test_a_directory_that_does_not_exist_yet_is_normalised(tmp_path: Path) -> None:
    real = str(tmp_path.resolve())

    assert canonical_path(f"{real}/not/yet//") == f"{real}/not/yet"


@pytest.mark.parametrize("path", ["repo", "./repo", "../repo", "~/repo", ""])
def test_a_relative_or_empty_path_is_refused(path: str) -> None:
    with pytest.raises(InvalidWorkspacePath) as refused:
        canonical_path(path)

    assert refused.value.reason == "INVALID_WORKSPACE_PATH"
    assert refused.value.status == "INVALID_ARGUMENT"


def test_a_nul_character_is_refused() -> None:
    with pytest.raises(InvalidWorkspacePath):
        canonical_path("/tmp/a\0b")


def test_a_symlink_resolving_past_the_cwd_limit_is_refused(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*(f"{n:02d}" + "d" * 198 for n in range(19)))
    deep.mkdir(parents=True)
    (tmp_path / "link").symlink_to(deep)
    short = tmp_path / "link" / ("y" * 250)
    short.mkdir()  # a real folder, whose own spelling is short
    assert len(str(short)) < 4096 < len(str(deep)) + 251

    with pytest.raises(InvalidWorkspacePath):
        canonical_path(str(short))


async def test_spellings_of_one_directory_share_one_workspace(
    tmp_path: Path, workspaces: Workspaces
) -> None:
    target = tmp_path / "repo"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)

    first, created = await workspaces.create_workspace("acct", f"{target}/")
    again, created_again = await workspaces.create_workspace("acct", str(tmp_path / "link"))

    assert created and not created_again
    assert again == first
    assert first.path == str(target.resolve())


async def test_a_relative_path_creates_no_workspace(workspaces: Workspaces) -> None:
    with pytest.raises(InvalidWorkspacePath):
        await workspaces.create_workspace("acct", "repo")

    assert await workspaces.list_workspaces("acct") == []


def test_a_folder_or_a_link_to_one_is_a_workspace_path(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "repo")

    assert workspace_path(f"{tmp_path}/link/") == str((tmp_path / "repo").resolve())


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("missing", "does not exist"),
        ("file.txt", "is not a directory"),
        ("file-link", "is not a directory"),
        ("file.txt/below", "does not exist"),
        ("dangling", "does not exist"),
        ("x" * 300, "does not exist"),
    ],
)
def test_what_is_not_an_existing_folder_is_refused(tmp_path: Path, name: str, why: str) -> None:
    (tmp_path / "file.txt").write_text("text\n")
    (tmp_path / "file-link").symlink_to(tmp_path / "file.txt")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")

    with pytest.raises(InvalidWorkspacePath) as refused:
        workspace_path(f"{tmp_path}/{name}")

    assert why in refused.value.message
    assert refused.value.metadata["field"] == "path"


@pytest.mark.parametrize("path", ["/", "//", "/tmp/..", "/./"])
def test_the_root_is_refused_however_spelled(path: str) -> None:
    with pytest.raises(InvalidWorkspacePath) as refused:
        workspace_path(path)

    assert "root of the file system" in refused.value.message


async def test_a_refused_path_creates_no_workspace(tmp_path: Path, workspaces: Workspaces) -> None:
    for path in ("/", f"{tmp_path}/missing"):
        with pytest.raises(InvalidWorkspacePath):
            await workspaces.create_workspace("acct", path)

    assert await workspaces.list_workspaces("acct") == []
