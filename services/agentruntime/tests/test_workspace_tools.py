"""The workspace file tools over real files in a temporary folder."""

from __future__ import annotations

import asyncio
import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.agentruntime import workspace_tools as wt
from services.agentruntime.tools import ToolOutcome
from services.agentruntime.workspace_tools import FileEdit, PathRefused, WorkspaceFiles


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    return folder


@pytest.fixture
def files(root: Path) -> WorkspaceFiles:
    return WorkspaceFiles(root)


def write(root: Path, relative: str, content: str | bytes) -> Path:
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        target.write_text(content)
    else:
        target.write_bytes(content)
    return target


def ok(outcome: ToolOutcome) -> str:
    assert outcome.ok, outcome.error
    assert outcome.error == ""
    return outcome.output


def failed(outcome: ToolOutcome) -> str:
    assert not outcome.ok, outcome.output
    assert outcome.error and "\n" not in outcome.error
    return outcome.error


def numbered(first: int, lines: list[str]) -> str:
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, first))


# --- resolve --------------------------------------------------------------------------


def test_relative_paths_resolve_under_the_root(files: WorkspaceFiles, root: Path) -> None:
    assert files.resolve("src/x.py", for_write=True) == root / "src" / "x.py"
    assert files.resolve("./a/../b") == root / "b"
    assert files.resolve(".") == root


def test_an_absolute_path_inside_the_root_is_accepted(files: WorkspaceFiles, root: Path) -> None:
    assert files.resolve(str(root / "a.txt")) == root / "a.txt"


@pytest.mark.parametrize("path", ["../x", "a/../../x", "../root2/x", "..", "/etc/passwd"])
def test_paths_outside_the_root_are_refused(files: WorkspaceFiles, root: Path, path: str) -> None:
    with pytest.raises(PathRefused) as refused:
        files.resolve(path)
    assert f"path {path!r} is outside the session folder {root}" == str(refused.value)


def test_the_root_given_through_a_symlink_is_its_real_folder(root: Path) -> None:
    alias = root.parent / "alias"
    alias.symlink_to(root)
    assert WorkspaceFiles(alias).resolve("a.txt") == root / "a.txt"
    assert WorkspaceFiles(alias).resolve(str(alias / "a.txt")) == root / "a.txt"


@pytest.mark.parametrize("link", ["out.txt", "sub/out.txt"])
def test_a_file_symlink_pointing_outside_is_refused(
    files: WorkspaceFiles, root: Path, link: str
) -> None:
    (root / "sub").mkdir()
    (root / link).symlink_to(root.parent / "outside" / "secret.txt")
    with pytest.raises(PathRefused, match="through a symlink"):
        files.resolve(link)


def test_a_directory_symlink_outside_is_refused_in_any_component(
    files: WorkspaceFiles, root: Path
) -> None:
    (root / "escape").symlink_to(root.parent / "outside")
    for path in ["escape", "escape/secret.txt", "escape/new/file.txt"]:
        with pytest.raises(PathRefused, match="through a symlink"):
            files.resolve(path, for_write=True)


def test_a_dangling_symlink_to_outside_is_refused_for_writes(
    files: WorkspaceFiles, root: Path
) -> None:
    (root / "later.txt").symlink_to(root.parent / "outside" / "not-yet.txt")
    with pytest.raises(PathRefused):
        files.resolve("later.txt", for_write=True)


def test_symlinks_inside_pointing_inside_are_fine(files: WorkspaceFiles, root: Path) -> None:
    write(root, "real/a.txt", "a\n")
    (root / "alias").symlink_to(root / "real")
    (root / "link.txt").symlink_to("real/a.txt")
    assert files.resolve("alias/a.txt") == root / "real" / "a.txt"
    assert files.resolve("link.txt") == root / "real" / "a.txt"
    assert files.resolve("alias/new.txt", for_write=True) == root / "real" / "new.txt"


def test_dot_dot_after_a_symlink_follows_the_real_folder(files: WorkspaceFiles, root: Path) -> None:
    (root / "deep" / "er").mkdir(parents=True)
    (root / "up").symlink_to(root / "deep" / "er")
    assert files.resolve("up/../x") == root / "deep" / "x"


@pytest.mark.parametrize(
    ("path", "reason"),
    [("", "path is empty"), ("  ", "path is empty"), ("a\0b", "path contains a NUL byte")],
)
def test_empty_and_nul_paths_are_refused(files: WorkspaceFiles, path: str, reason: str) -> None:
    with pytest.raises(PathRefused, match=reason):
        files.resolve(path)


def test_a_path_that_is_not_text_is_refused(files: WorkspaceFiles) -> None:
    with pytest.raises(PathRefused, match="not valid Unicode"):
        files.resolve("bad\ud800")
    with pytest.raises(PathRefused, match="must be a string"):
        files.resolve(42)  # type: ignore[arg-type]


def test_the_root_itself_is_not_a_write_target(files: WorkspaceFiles) -> None:
    with pytest.raises(PathRefused, match="session folder itself"):
        files.resolve(".", for_write=True)


def test_unconfined_paths_may_leave_the_root(root: Path) -> None:
    full = WorkspaceFiles(root, confined=False)
    secret = root.parent / "outside" / "secret.txt"
    assert full.resolve("../outside/secret.txt") == secret
    assert full.resolve(str(secret)) == secret


async def test_unconfined_tools_read_outside_the_root(root: Path) -> None:
    full = WorkspaceFiles(root, confined=False)
    assert ok(await full.read_file("../outside/secret.txt")) == numbered(1, ["secret"])


def test_a_symlink_loop_never_resolves_outside(files: WorkspaceFiles, root: Path) -> None:
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    for path in ["a", "a/x", "a/../../x"]:
        try:
            resolved = files.resolve(path)
        except PathRefused:
            continue
        assert resolved.is_relative_to(root)


async def test_a_symlink_loop_is_a_clear_error(files: WorkspaceFiles, root: Path) -> None:
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    assert failed(await files.read_file("a")) == "path 'a' runs into a symlink loop"


def test_a_symlink_loop_cannot_hide_an_escape(files: WorkspaceFiles, root: Path) -> None:
    # os.path.realpath answers root/out for this path, leaving the symlink unresolved.
    (root / "loop").symlink_to("loop")
    (root / "out").symlink_to(root.parent / "outside")
    with pytest.raises(PathRefused, match="symlink loop"):
        files.resolve("loop/../out")


def test_dot_dot_after_a_missing_folder_drops_it(files: WorkspaceFiles, root: Path) -> None:
    (root / "out").symlink_to(root.parent / "outside")
    assert files.resolve("new/deeper/../../x.txt", for_write=True) == root / "x.txt"
    with pytest.raises(PathRefused, match="through a symlink"):
        files.resolve("new/../out/x.txt", for_write=True)


def test_a_path_under_a_file_is_refused(files: WorkspaceFiles, root: Path) -> None:
    write(root, "x.txt", "x")
    with pytest.raises(PathRefused, match="Not a directory"):
        files.resolve("x.txt/y", for_write=True)


def test_relative_and_absolute_symlink_targets(files: WorkspaceFiles, root: Path) -> None:
    write(root, "d/e/f.txt", "f")
    (root / "d" / "rel").symlink_to("e/f.txt")
    (root / "d" / "up").symlink_to("../d/e")
    (root / "abs").symlink_to(root / "d" / "e")
    assert files.resolve("d/rel") == root / "d" / "e" / "f.txt"
    assert files.resolve("d/up/f.txt") == root / "d" / "e" / "f.txt"
    assert files.resolve("abs/../rel") == root / "d" / "e" / "f.txt"


# --- property: resolve stays inside ---------------------------------------------------

COMPONENTS = ["a", "b", "f", "..", ".", "", "new", "loop", "up"]
COMPONENTS += ["in_dir", "in_file", "out_dir", "out_file"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("tree")
    root, outside = base / "root", base / "outside"
    for folder in (root / "a" / "b", root / "b" / "a", outside / "a"):
        folder.mkdir(parents=True)
    (outside / "f").write_text("x")
    (root / "a" / "f").write_text("x")
    for folder in (root, root / "a", root / "b" / "a"):
        (folder / "in_dir").symlink_to(root / "b")
        (folder / "in_file").symlink_to(root / "a" / "f")
        (folder / "out_dir").symlink_to(outside)
        (folder / "out_file").symlink_to(outside / "f")
        (folder / "loop").symlink_to(folder / "loop")
        (folder / "up").symlink_to("..")
    return root


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=8), write_=st.booleans())
def test_resolve_is_inside_the_root_or_refused(tree: Path, parts: list[str], write_: bool) -> None:
    files = WorkspaceFiles(tree)
    try:
        resolved = files.resolve("/".join(parts), for_write=write_)
    except PathRefused as refused:
        assert str(refused)
        return
    assert resolved.is_absolute()
    assert Path(os.path.realpath(resolved)).is_relative_to(tree)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.text(max_size=40), number=st.one_of(st.none(), st.integers(-5, 5)))
def test_read_tools_never_raise_for_any_text(tree: Path, path: str, number: int | None) -> None:
    files = WorkspaceFiles(tree)

    async def calls() -> list[ToolOutcome]:
        return [
            await files.read_file(path, number, number),
            await files.list_dir(path),
            await files.glob(path or "*", "."),
            await files.grep(path or "x", ".", glob=path or None, max_results=number),
        ]

    for outcome in asyncio.run(calls()):
        assert isinstance(outcome, ToolOutcome)
        assert (outcome.output if outcome.ok else outcome.error).encode("utf-8")


# --- every tool refuses paths outside and runs off the event loop ---------------------


async def test_every_tool_refuses_an_escape_with_an_outcome(files: WorkspaceFiles) -> None:
    calls: list[ToolOutcome] = [
        await files.read_file("../outside/secret.txt"),
        await files.list_dir("../outside"),
        await files.glob("*", "../outside"),
        await files.grep("secret", "../outside"),
        (await files.write_file("../outside/new.txt", "x")).outcome,
        (await files.edit_file("../outside/secret.txt", "secret", "public")).outcome,
    ]
    for outcome in calls:
        assert "is outside the session folder" in failed(outcome)


async def test_edits_that_fail_carry_no_change(files: WorkspaceFiles) -> None:
    edit = await files.write_file("../x", "x")
    assert edit.change is None and not edit.outcome.ok


async def test_file_io_runs_on_a_worker_thread(
    files: WorkspaceFiles, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(root, "a.txt", "a\n")
    loop_thread = threading.get_ident()
    seen: list[int] = []
    original = wt.WorkspaceFiles.resolve

    def spy(self: WorkspaceFiles, path: str, *, for_write: bool = False) -> Path:
        seen.append(threading.get_ident())
        return original(self, path, for_write=for_write)

    monkeypatch.setattr(wt.WorkspaceFiles, "resolve", spy)
    await files.read_file("a.txt")
    await files.list_dir(".")
    await files.write_file("b.txt", "b")
    await files.edit_file("b.txt", "b", "c")
    assert seen and loop_thread not in seen


# --- read_file ------------------------------------------------------------------------


async def test_read_file_numbers_lines_like_cat_n(files: WorkspaceFiles, root: Path) -> None:
    write(root, "x.py", "import os\n\n\tprint(os)\n")
    assert ok(await files.read_file("x.py")) == "     1\timport os\n     2\t\n     3\t\tprint(os)"


async def test_read_file_strips_crlf_and_counts_a_last_line_without_newline(
    files: WorkspaceFiles, root: Path
) -> None:
    write(root, "x.txt", b"a\r\nb\r\nc")
    assert ok(await files.read_file("x.txt")) == numbered(1, ["a", "b", "c"])


async def test_read_file_offset_and_limit_select_lines(files: WorkspaceFiles, root: Path) -> None:
    write(root, "x.txt", "".join(f"line {n}\n" for n in range(1, 11)))
    assert ok(await files.read_file("x.txt", offset=3, limit=2)) == (
        numbered(3, ["line 3", "line 4"])
        + "\n\n… file has 10 lines; showing 3-4; call again with offset=5"
    )
    assert ok(await files.read_file("x.txt", offset=9)) == numbered(9, ["line 9", "line 10"])
    assert ok(await files.read_file("x.txt", limit=1)).startswith(numbered(1, ["line 1"]))


async def test_read_file_caps_at_2000_lines(files: WorkspaceFiles, root: Path) -> None:
    write(root, "big.txt", "".join(f"{n}\n" for n in range(1, 2501)))
    output = ok(await files.read_file("big.txt"))
    body, note = output.split("\n\n")
    assert len(body.splitlines()) == 2000
    assert body.splitlines()[-1] == "  2000\t2000"
    assert note == "… file has 2500 lines; showing 1-2000; call again with offset=2001"
    rest = ok(await files.read_file("big.txt", offset=2001, limit=5000))
    assert rest.splitlines()[0] == "  2001\t2001" and rest.splitlines()[-1] == "  2500\t2500"


async def test_read_file_caps_output_at_256_kib(files: WorkspaceFiles, root: Path) -> None:
    line = "x" * 1000
    write(root, "wide.txt", (line + "\n") * 1000)
    output = ok(await files.read_file("wide.txt"))
    body, note = output.split("\n\n")
    assert len(body.encode()) <= wt.MAX_READ_BYTES
    shown = len(body.splitlines())
    assert 200 < shown < 1000
    assert note == (f"… file has 1000 lines; showing 1-{shown}; call again with offset={shown + 1}")


async def test_read_file_cuts_a_single_line_over_the_cap(files: WorkspaceFiles, root: Path) -> None:
    write(root, "one.txt", "y" * (wt.MAX_READ_BYTES * 2) + "\nnext\n")
    output = ok(await files.read_file("one.txt"))
    assert len(output.encode()) < wt.MAX_READ_BYTES + 500
    assert "line 1 is longer than the output cap and was cut" in output
    assert "call again with offset=2" in output
    # The numbering after the cut line holds: the next line is line 2.
    assert ok(await files.read_file("one.txt", offset=2)).startswith("     2\tnext")


def test_a_huge_line_is_read_only_up_to_the_limit_and_skipped() -> None:
    handle = io.BytesIO(b"z" * 10_000_000 + b"\nsecond\n")
    assert wt._next_line(handle, 100) == b"z" * 100
    assert handle.tell() == 10_000_001
    assert wt._next_line(handle, 100) == b"second\n"


async def test_read_file_reports_binary_files(files: WorkspaceFiles, root: Path) -> None:
    write(root, "img.png", b"\x89PNG\0\0" + bytes(range(256)) * 10)
    assert ok(await files.read_file("img.png")) == "img.png: binary file (2566 bytes), not shown"


async def test_read_file_replaces_undecodable_bytes_and_says_so(
    files: WorkspaceFiles, root: Path
) -> None:
    write(root, "latin.txt", "café\n".encode("latin-1"))
    output = ok(await files.read_file("latin.txt"))
    assert output.startswith("     1\tcaf\ufffd\n")
    assert "not valid UTF-8" in output


async def test_read_file_of_an_empty_file_says_so(files: WorkspaceFiles, root: Path) -> None:
    write(root, "empty.txt", "")
    assert ok(await files.read_file("empty.txt")) == "empty.txt is empty"


async def test_read_file_of_a_directory_suggests_list_dir(
    files: WorkspaceFiles, root: Path
) -> None:
    (root / "src").mkdir()
    assert (
        failed(await files.read_file("src"))
        == "src is a directory; use list_dir to see its entries"
    )


async def test_read_file_offset_past_the_end(files: WorkspaceFiles, root: Path) -> None:
    write(root, "x.txt", "a\nb\n")
    assert failed(await files.read_file("x.txt", offset=5)) == (
        "offset 5 is past the end of x.txt (2 lines)"
    )


async def test_read_file_of_a_missing_file(files: WorkspaceFiles) -> None:
    assert failed(await files.read_file("nope.txt")) == (
        "cannot read 'nope.txt': No such file or directory"
    )


async def test_os_errors_become_one_line_reasons(
    files: WorkspaceFiles, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(root, "x.txt", "x\n")

    def denied(self: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "open", denied)
    monkeypatch.setattr(Path, "read_bytes", denied)
    monkeypatch.setattr(Path, "write_bytes", denied)
    assert failed(await files.read_file("x.txt")) == "cannot read 'x.txt': Permission denied"
    assert failed((await files.edit_file("x.txt", "x", "y")).outcome) == (
        "cannot edit 'x.txt': Permission denied"
    )
    assert failed((await files.write_file("y.txt", "y")).outcome) == (
        "cannot write 'y.txt': Permission denied"
    )


async def test_read_file_refuses_a_fifo(files: WorkspaceFiles, root: Path) -> None:
    os.mkfifo(root / "pipe")
    assert failed(await files.read_file("pipe")) == "pipe is not a regular file"


@pytest.mark.parametrize(
    ("offset", "limit", "reason"),
    [
        (0, None, "offset must be at least 1"),
        (None, 0, "limit must be at least 1"),
        ("3", None, "offset must be an integer"),
        (None, True, "limit must be an integer"),
    ],
)
async def test_read_file_checks_its_numbers(
    files: WorkspaceFiles, root: Path, offset: Any, limit: Any, reason: str
) -> None:
    write(root, "x.txt", "a\n")
    assert failed(await files.read_file("x.txt", offset, limit)) == reason


async def test_read_file_accepts_whole_floats(files: WorkspaceFiles, root: Path) -> None:
    write(root, "x.txt", "a\nb\n")
    assert ok(await files.read_file("x.txt", 2.0)) == numbered(2, ["b"])  # type: ignore[arg-type]


# --- list_dir -------------------------------------------------------------------------


async def test_list_dir_sorts_and_marks_entries(files: WorkspaceFiles, root: Path) -> None:
    write(root, "b.txt", "b")
    write(root, "a/inner.txt", "i")
    (root / "link").symlink_to("a")
    (root / "dead").symlink_to("missing")
    (root / "file-link").symlink_to("b.txt")
    assert ok(await files.list_dir(".")) == "\n".join(
        [
            "a/",
            "b.txt",
            "dead -> missing (symlink) (broken)",
            "file-link -> b.txt (symlink)",
            "link/ -> a (symlink)",
        ]
    )
    assert ok(await files.list_dir("a")) == "inner.txt"


async def test_list_dir_caps_at_1000_entries(files: WorkspaceFiles, root: Path) -> None:
    for n in range(1005):
        (root / f"f{n:04}").touch()
    lines = ok(await files.list_dir()).splitlines()
    assert len(lines) == 1001
    assert lines[0] == "f0000" and lines[999] == "f0999"
    assert lines[-1] == "… 1005 entries; showing the first 1000"


async def test_list_dir_of_an_empty_folder_and_of_a_file(files: WorkspaceFiles, root: Path) -> None:
    (root / "empty").mkdir()
    write(root, "x.txt", "x")
    assert ok(await files.list_dir("empty")) == "empty is an empty directory"
    assert failed(await files.list_dir("x.txt")) == (
        "x.txt is not a directory; use read_file to read a file"
    )
    assert failed(await files.list_dir("nope")) == ("cannot list 'nope': No such file or directory")


# --- glob -----------------------------------------------------------------------------


@pytest.fixture
def project(root: Path) -> Path:
    for path in [
        "setup.py",
        "README.md",
        "src/app.py",
        "src/pkg/core.py",
        "src/pkg/data.json",
        "tests/test_app.py",
        ".git/config.py",
        "src/.hidden.py",
    ]:
        write(root, path, "import os\n")
    return root


async def test_glob_star_stays_in_one_folder(files: WorkspaceFiles, project: Path) -> None:
    assert ok(await files.glob("*.py")) == "setup.py"


async def test_glob_double_star_matches_any_depth(files: WorkspaceFiles, project: Path) -> None:
    assert ok(await files.glob("**/*.py")).splitlines() == [
        "setup.py",
        "src/.hidden.py",
        "src/app.py",
        "src/pkg/core.py",
        "tests/test_app.py",
    ]
    assert ok(await files.glob("src/**/*.py")).splitlines() == [
        "src/.hidden.py",
        "src/app.py",
        "src/pkg/core.py",
    ]
    assert ok(await files.glob("src/**")).splitlines() == [
        "src/.hidden.py",
        "src/app.py",
        "src/pkg/core.py",
        "src/pkg/data.json",
    ]


async def test_glob_under_a_path_answers_paths_relative_to_the_root(
    files: WorkspaceFiles, project: Path
) -> None:
    assert ok(await files.glob("*.py", "src/pkg")) == "src/pkg/core.py"
    assert ok(await files.glob("**/c?re.[pq]y", "src")) == "src/pkg/core.py"


async def test_glob_lists_files_only_and_skips_git(files: WorkspaceFiles, project: Path) -> None:
    found = ok(await files.glob("**")).splitlines()
    assert "src/pkg" not in found and "src" not in found
    assert not any(path.startswith(".git") for path in found)


async def test_glob_without_matches(files: WorkspaceFiles, project: Path) -> None:
    assert ok(await files.glob("**/*.rs")) == "no files match '**/*.rs'"


@pytest.mark.parametrize("pattern", ["../*", "/etc/*", "src/../../*"])
async def test_glob_refuses_patterns_that_escape(
    files: WorkspaceFiles, project: Path, pattern: str
) -> None:
    assert "would leave the search folder" in failed(await files.glob(pattern))


async def test_glob_does_not_follow_symlinks_outside(files: WorkspaceFiles, root: Path) -> None:
    write(root, "in.txt", "x")
    (root / "escape").symlink_to(root.parent / "outside")
    (root / "secret.txt").symlink_to(root.parent / "outside" / "secret.txt")
    (root / "alias.txt").symlink_to("in.txt")
    assert ok(await files.glob("**/*.txt")).splitlines() == ["alias.txt", "in.txt"]


async def test_glob_caps_at_500(files: WorkspaceFiles, root: Path) -> None:
    for n in range(510):
        (root / f"f{n:03}.txt").touch()
    lines = ok(await files.glob("*.txt")).splitlines()
    assert len(lines) == 501 and lines[499] == "f499.txt"
    assert lines[-1] == "… 510 files match; showing the first 500; narrow the pattern or path"


async def test_glob_errors(files: WorkspaceFiles, project: Path) -> None:
    assert failed(await files.glob("")) == "pattern is empty"
    assert failed(await files.glob("*", "setup.py")) == "setup.py is not a directory"
    assert failed(await files.glob(None)) == "pattern must be a string"  # type: ignore[arg-type]


# --- grep -----------------------------------------------------------------------------


async def test_grep_answers_path_line_text(files: WorkspaceFiles, root: Path) -> None:
    write(root, "a.py", "one\ntwo\nthree\n")
    write(root, "sub/b.py", "two again\n")
    assert ok(await files.grep("t[wh]")).splitlines() == [
        "a.py:2:two",
        "a.py:3:three",
        "sub/b.py:1:two again",
    ]


async def test_grep_searches_a_single_file_or_folder(files: WorkspaceFiles, root: Path) -> None:
    write(root, "a.py", "hit\n")
    write(root, "sub/b.py", "hit\n")
    assert ok(await files.grep("hit", "sub")) == "sub/b.py:1:hit"
    assert ok(await files.grep("hit", "a.py")) == "a.py:1:hit"


async def test_grep_ignore_case(files: WorkspaceFiles, root: Path) -> None:
    write(root, "a.txt", "Hello\n")
    assert ok(await files.grep("hello")) == "no matches"
    assert ok(await files.grep("hello", ignore_case=True)) == "a.txt:1:Hello"


async def test_grep_glob_filters_by_name_or_relative_path(
    files: WorkspaceFiles, project: Path
) -> None:
    assert ok(await files.grep("import", glob="*.json")) == "src/pkg/data.json:1:import os"
    assert ok(await files.grep("import", glob="src/*.py")).splitlines() == [
        "src/.hidden.py:1:import os",
        "src/app.py:1:import os",
    ]
    assert ok(await files.grep("import", "src", glob="**/pkg/*.py")) == (
        "src/pkg/core.py:1:import os"
    )


async def test_grep_skips_vcs_binary_and_huge_files(files: WorkspaceFiles, root: Path) -> None:
    for folder in [".git", ".hg", ".svn"]:
        write(root, f"{folder}/x", "needle\n")
    write(root, "bin.dat", b"needle\0\n")
    write(root, "huge.txt", "needle\n" + "x" * wt.MAX_GREP_FILE_BYTES)
    write(root, "ok.txt", "needle\n")
    assert ok(await files.grep("needle")) == "ok.txt:1:needle"


async def test_grep_of_a_binary_or_huge_file_says_why(files: WorkspaceFiles, root: Path) -> None:
    write(root, "bin.dat", b"needle\0\n")
    write(root, "huge.txt", "x" * (wt.MAX_GREP_FILE_BYTES + 1))
    assert failed(await files.grep("needle", "bin.dat")) == (
        "bin.dat is a binary file; grep skips binary files"
    )
    assert "larger than 2 MiB" in failed(await files.grep("x", "huge.txt"))


async def test_grep_cuts_long_lines(files: WorkspaceFiles, root: Path) -> None:
    write(root, "long.txt", "needle" + "z" * 1000 + "\n")
    line = ok(await files.grep("needle"))
    assert line == "long.txt:1:" + ("needle" + "z" * 1000)[:500] + "…"


async def test_grep_reads_non_utf8_text_with_replacement(files: WorkspaceFiles, root: Path) -> None:
    write(root, "latin.txt", "café needle\n".encode("latin-1"))
    assert ok(await files.grep("needle")) == "latin.txt:1:caf\ufffd needle"


async def test_grep_invalid_regex(files: WorkspaceFiles) -> None:
    assert failed(await files.grep("(unclosed")).startswith("invalid regex: ")


async def test_grep_caps_results(files: WorkspaceFiles, root: Path) -> None:
    write(root, "many.txt", "hit\n" * 1500)
    default = ok(await files.grep("hit")).splitlines()
    assert len(default) == 201 and default[199] == "many.txt:200:hit"
    assert default[-1].startswith("… results capped at 200 matches")
    assert len(ok(await files.grep("hit", max_results=5)).splitlines()) == 6
    top = ok(await files.grep("hit", max_results=5000)).splitlines()
    assert len(top) == 1001 and top[-1].startswith("… results capped at 1000 matches")


async def test_grep_exactly_at_the_cap_is_not_capped(files: WorkspaceFiles, root: Path) -> None:
    write(root, "three.txt", "hit\nhit\nhit\n")
    assert len(ok(await files.grep("hit", max_results=3)).splitlines()) == 3


async def test_grep_checks_its_arguments(files: WorkspaceFiles, root: Path) -> None:
    write(root, "a.txt", "a\n")
    assert failed(await files.grep("a", max_results=0)) == "max_results must be at least 1"
    assert failed(await files.grep("a", ignore_case="yes")) == (  # type: ignore[arg-type]
        "ignore_case must be true or false"
    )
    assert "would leave" in failed(await files.grep("a", glob="../*/x"))
    assert failed(await files.grep("a", "nope")) == (
        "cannot search 'nope': No such file or directory"
    )


async def test_grep_does_not_follow_symlinks_outside(files: WorkspaceFiles, root: Path) -> None:
    (root / "escape").symlink_to(root.parent / "outside")
    (root / "secret.txt").symlink_to(root.parent / "outside" / "secret.txt")
    assert ok(await files.grep("secret")) == "no matches"


# --- write_file -----------------------------------------------------------------------


async def test_write_file_creates_a_file_and_its_folders(files: WorkspaceFiles, root: Path) -> None:
    edit = await files.write_file("src/deep/x.py", "a\nb\n")
    assert ok(edit.outcome) == "wrote src/deep/x.py (+2 -0)"
    assert (root / "src" / "deep" / "x.py").read_bytes() == b"a\nb\n"
    assert edit.change == wt.FileChange(
        path="src/deep/x.py",
        added=2,
        removed=0,
        diff="--- /dev/null\n+++ b/src/deep/x.py\n@@ -0,0 +1,2 @@\n+a\n+b\n",
        created=True,
    )


async def test_write_file_diffs_against_the_previous_content(
    files: WorkspaceFiles, root: Path
) -> None:
    write(root, "x.txt", "keep\nold\n")
    edit = await files.write_file("./x.txt", "keep\nnew\nmore")
    assert ok(edit.outcome) == "wrote x.txt (+2 -1)"
    assert edit.change is not None and not edit.change.created
    assert edit.change.diff == (
        "--- a/x.txt\n+++ b/x.txt\n@@ -1,2 +1,3 @@\n keep\n-old\n+new\n+more\n"
        "\\ No newline at end of file\n"
    )


async def test_write_file_with_unchanged_content_has_an_empty_diff(
    files: WorkspaceFiles, root: Path
) -> None:
    write(root, "x.txt", "same\n")
    edit = await files.write_file("x.txt", "same\n")
    assert edit.change is not None
    assert (edit.change.added, edit.change.removed, edit.change.diff) == (0, 0, "")


async def test_write_file_writes_utf8_exactly(files: WorkspaceFiles, root: Path) -> None:
    await files.write_file("u.txt", "é\r\n€")
    assert (root / "u.txt").read_bytes() == "é\r\n€".encode()


async def test_write_file_onto_a_directory_is_an_error(files: WorkspaceFiles, root: Path) -> None:
    (root / "src").mkdir()
    edit = await files.write_file("src", "x")
    assert failed(edit.outcome) == "src is a directory; write_file writes files"
    assert edit.change is None


async def test_write_file_under_a_file_is_an_error(files: WorkspaceFiles, root: Path) -> None:
    write(root, "x.txt", "x")
    assert failed((await files.write_file("x.txt/y", "y")).outcome) == (
        "cannot resolve path 'x.txt/y': Not a directory"
    )


async def test_write_file_through_an_inside_symlink(files: WorkspaceFiles, root: Path) -> None:
    (root / "real").mkdir()
    (root / "alias").symlink_to("real")
    ok((await files.write_file("alias/x.txt", "x")).outcome)
    assert (root / "real" / "x.txt").read_text() == "x"


async def test_write_file_refuses_bad_content(files: WorkspaceFiles) -> None:
    assert failed((await files.write_file("x", "\ud800")).outcome).startswith(
        "content is not valid Unicode text"
    )
    assert failed((await files.write_file("x", None)).outcome) == (  # type: ignore[arg-type]
        "content must be a string"
    )


# --- edit_file ------------------------------------------------------------------------


async def test_edit_file_replaces_a_unique_string(files: WorkspaceFiles, root: Path) -> None:
    write(root, "x.py", "def f():\n    return 1\n")
    edit = await files.edit_file("x.py", "return 1", "x = 1\n    y = 2\n    return x + y")
    assert ok(edit.outcome) == "edited x.py: 1 replacement (+3 -1)"
    assert (root / "x.py").read_text() == "def f():\n    x = 1\n    y = 2\n    return x + y\n"
    assert edit.change is not None and edit.change.diff.startswith("--- a/x.py\n+++ b/x.py\n")
    assert "-    return 1\n" in edit.change.diff


async def test_edit_file_refuses_a_missing_match(files: WorkspaceFiles, root: Path) -> None:
    write(root, "x.py", "a\n")
    edit = await files.edit_file("x.py", "b", "c")
    assert failed(edit.outcome) == "old_string not found in x.py"
    assert edit.change is None


async def test_edit_file_refuses_an_ambiguous_match(files: WorkspaceFiles, root: Path) -> None:
    write(root, "x.py", "a a a\n")
    assert failed((await files.edit_file("x.py", "a", "b")).outcome) == (
        "old_string occurs 3 times in x.py; give more context or set replace_all"
    )
    assert (root / "x.py").read_text() == "a a a\n"


async def test_edit_file_replace_all(files: WorkspaceFiles, root: Path) -> None:
    write(root, "x.py", "a\na\na\n")
    edit = await files.edit_file("x.py", "a", "b", replace_all=True)
    assert ok(edit.outcome) == "edited x.py: 3 replacements (+3 -3)"
    assert (root / "x.py").read_text() == "b\nb\nb\n"


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("", "x", "old_string must not be empty; use write_file to create or overwrite a file"),
        ("a", "a", "old_string and new_string are identical; nothing would change"),
    ],
)
async def test_edit_file_checks_its_strings(
    files: WorkspaceFiles, root: Path, old: str, new: str, reason: str
) -> None:
    write(root, "x.py", "a\n")
    assert failed((await files.edit_file("x.py", old, new)).outcome) == reason


async def test_edit_file_refuses_binary_and_non_utf8(files: WorkspaceFiles, root: Path) -> None:
    write(root, "bin", b"a\0b")
    write(root, "latin.txt", "café".encode("latin-1"))
    assert failed((await files.edit_file("bin", "a", "b")).outcome) == (
        "bin is a binary file, not UTF-8 text; edit_file only edits UTF-8 text"
    )
    assert failed((await files.edit_file("latin.txt", "caf", "tea")).outcome) == (
        "latin.txt is not UTF-8 text; edit_file only edits UTF-8 text"
    )


async def test_edit_file_refuses_a_file_over_its_size_cap_and_write_file_replaces_it(
    files: WorkspaceFiles, root: Path
) -> None:
    big = write(root, "big.log", "line\n" * (wt.MAX_EDIT_FILE_BYTES // 5 + 1))
    assert failed((await files.edit_file("big.log", "line", "row")).outcome) == (
        f"big.log is {big.stat().st_size} bytes; edit_file edits files up to "
        f"{wt.MAX_EDIT_FILE_BYTES} bytes (use a command, e.g. sed, for larger ones)"
    )
    assert ok((await files.write_file("big.log", "short\n")).outcome).startswith("wrote big.log")
    assert big.read_text() == "short\n"


async def test_edit_file_of_a_missing_file_or_folder(files: WorkspaceFiles, root: Path) -> None:
    (root / "src").mkdir()
    assert failed((await files.edit_file("nope.py", "a", "b")).outcome) == (
        "nope.py does not exist; use write_file to create it"
    )
    assert failed((await files.edit_file("src", "a", "b")).outcome) == (
        "src is a directory; edit_file edits files"
    )


async def test_edit_file_keeps_every_other_byte(files: WorkspaceFiles, root: Path) -> None:
    original = "\ufeffline one\r\nmiddle\r\n\tlast  \r\n".encode()
    write(root, "win.txt", original)
    ok((await files.edit_file("win.txt", "middle", "centre")).outcome)
    assert (root / "win.txt").read_bytes() == original.replace(b"middle", b"centre")


async def test_edit_file_matches_lf_strings_in_a_crlf_file(
    files: WorkspaceFiles, root: Path
) -> None:
    write(root, "win.txt", b"a\r\nb\r\nc\r\n")
    ok((await files.edit_file("win.txt", "a\nb\n", "x\ny\nz\n")).outcome)
    assert (root / "win.txt").read_bytes() == b"x\r\ny\r\nz\r\nc\r\n"


async def test_edit_file_checks_replace_all(files: WorkspaceFiles, root: Path) -> None:
    write(root, "x.txt", "a\n")
    outcome = (await files.edit_file("x.txt", "a", "b", replace_all=1)).outcome  # type: ignore[arg-type]
    assert failed(outcome) == "replace_all must be true or false"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.text(alphabet="ab\r\n\té", max_size=30),
    old=st.text(alphabet="ab\r\n\té", min_size=1, max_size=4),
    after=st.text(alphabet="ab\r\n\té", max_size=30),
    new=st.text(alphabet="xy\r\n", max_size=4),
)
def test_edit_file_changes_only_the_replaced_bytes(
    tree: Path, before: str, old: str, after: str, new: str
) -> None:
    content = before + old + after
    target = tree / "prop" / "edit.txt"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(content.encode())
    edit: FileEdit = asyncio.run(WorkspaceFiles(tree).edit_file("prop/edit.txt", old, new))
    if old == new or content.count(old) != 1:
        assert not edit.outcome.ok and target.read_bytes() == content.encode()
        return
    assert edit.outcome.ok
    assert target.read_bytes() == content.replace(old, new, 1).encode()


async def test_undecodable_file_names_give_utf8_text(files: WorkspaceFiles, root: Path) -> None:
    name = os.fsdecode(b"caf\xff.txt")
    edit = await files.write_file(name, "x\n")
    assert (root / name).read_bytes() == b"x\n"
    assert edit.change is not None
    for text in [ok(edit.outcome), edit.change.path, edit.change.diff]:
        assert text.encode("utf-8") and "caf\ufffd.txt" in text
    assert ok(await files.list_dir()) == "caf\ufffd.txt"
    assert ok(await files.grep("x")) == "caf\ufffd.txt:1:x"


# --- schemas --------------------------------------------------------------------------

SCHEMAS = {
    "read_file": (wt.READ_FILE_PARAMETERS, wt.READ_FILE_DESCRIPTION, ["path"]),
    "list_dir": (wt.LIST_DIR_PARAMETERS, wt.LIST_DIR_DESCRIPTION, []),
    "glob": (wt.GLOB_PARAMETERS, wt.GLOB_DESCRIPTION, ["pattern"]),
    "grep": (wt.GREP_PARAMETERS, wt.GREP_DESCRIPTION, ["pattern"]),
    "write_file": (wt.WRITE_FILE_PARAMETERS, wt.WRITE_FILE_DESCRIPTION, ["path", "content"]),
    "edit_file": (
        wt.EDIT_FILE_PARAMETERS,
        wt.EDIT_FILE_DESCRIPTION,
        ["path", "old_string", "new_string"],
    ),
}


def arguments(method: str) -> Iterator[str]:
    code = getattr(WorkspaceFiles, method).__code__
    yield from code.co_varnames[1 : code.co_argcount]


@pytest.mark.parametrize("tool", sorted(SCHEMAS))
def test_schemas_match_the_methods(tool: str) -> None:
    schema, description, required = SCHEMAS[tool]
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == required
    assert list(schema["properties"]) == list(arguments(tool))
    assert all(prop["description"] for prop in schema["properties"].values())
    assert description and "\n" not in description


# -- what is hidden from commands is hidden from the file tools ------------------------------


async def test_hidden_folders_inside_the_session_folder_are_out_of_reach(root: Path) -> None:
    """A data folder (with its token) or another session's folder nested in
    this one: confined commands see an empty, read-only folder there, and
    the file tools refuse it and leave it out of glob and grep."""
    write(root, ".agenthost/token", "tok-secret\n")
    write(root, "other-session/notes.txt", "tok-secret too\n")
    write(root, "src/app.py", "print('tok')\n")
    (root / "link-to-token").symlink_to(root / ".agenthost" / "token")
    hidden = (root / ".agenthost", root / "other-session")
    files = WorkspaceFiles(root, hidden=hidden)
    for path in (".agenthost/token", "other-session/notes.txt", "link-to-token"):
        read = await files.read_file(path)
        assert not read.ok and "hidden from the agent" in read.error, path
    written = (await files.write_file("other-session/planted.txt", "x")).outcome
    assert not written.ok and not (root / "other-session" / "planted.txt").exists()
    found = await files.grep("tok")
    assert "src/app.py" in found.output and "secret" not in found.output
    globbed = await files.glob("**")
    assert "src/app.py" in globbed.output and "token" not in globbed.output
    assert "notes.txt" not in globbed.output
    # A hidden folder holding the session folder (a data folder keeping
    # workspaces) leaves the session folder itself alone.
    assert (await WorkspaceFiles(root, hidden=(root.parent,)).read_file("src/app.py")).ok
    # The full sandbox hides nothing.
    assert (
        await WorkspaceFiles(root, confined=False, hidden=hidden).read_file(".agenthost/token")
    ).ok


# -- folders outside the session's that may be read (a skill's) --------------------------------


async def test_a_readable_folder_outside_is_read_never_written(root: Path, tmp_path: Path) -> None:
    skill = tmp_path / "config" / "skills" / "lint"
    write(skill, "SKILL.md", "---\nname: lint\n---\nRun it.\n")
    write(skill, "rules/style.md", "no tabs\n")
    write(tmp_path / "config", "token", "tok-secret\n")
    (skill / "escape").symlink_to(tmp_path / "outside" / "secret.txt")
    files = WorkspaceFiles(root, readable=(skill,))
    assert "no tabs" in ok(await files.read_file(str(skill / "rules" / "style.md")))
    assert ok(await files.list_dir(str(skill))).splitlines()[-1].startswith("rules")
    assert str(skill / "rules" / "style.md") in ok(await files.glob("**/*.md", str(skill)))
    assert "style.md:1:no tabs" in ok(await files.grep("tabs", str(skill)))
    # Beside it, or out of it through a symlink or "..": outside, as before.
    for path in (tmp_path / "config" / "token", skill / "escape", skill / ".." / ".." / "token"):
        assert "outside the session folder" in failed(await files.read_file(str(path)))
    # Never written, edited or created in.
    target = str(skill / "rules" / "style.md")
    for edit in (
        await files.write_file(target, "tabs\n"),
        await files.edit_file(target, "no tabs", "tabs"),
        await files.write_file(str(skill / "new.md"), "x"),
    ):
        assert "may be read, never written" in failed(edit.outcome)
    assert (skill / "rules" / "style.md").read_text() == "no tabs\n"
    assert not (skill / "new.md").exists()


async def test_what_is_hidden_stays_hidden_in_a_readable_folder(root: Path, tmp_path: Path) -> None:
    """A readable folder inside a hidden one (the data folder, which also
    holds the session's folder here) is still hidden outside the session's folder."""
    data = tmp_path / "data"
    skill = data / "skills" / "x"
    write(skill, "SKILL.md", "secret skill\n")
    session = data / "workspaces" / "w"
    session.mkdir(parents=True)
    files = WorkspaceFiles(session, hidden=(data,), readable=(skill,))
    assert "hidden from the agent" in failed(await files.read_file(str(skill / "SKILL.md")))
