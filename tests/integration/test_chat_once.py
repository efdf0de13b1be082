"""`agenthost chat` shows each thing once (issue 43, items 7 to 9), read off
a terminal emulator (pyte, with its scrollback) fed everything the chat
wrote to its pseudo-terminal, against `agenthost up` with its built-in
model scripted: a command's line once (its approval), its output folded,
its failure as `exit 1` once, a diff once, no spinner after the answer,
an answer taller than the screen once, /plan and /compact one line each, a
cancelled answer not printed again; a resumed session's last turns whole
with a line per tool call, its denials, cancels, compaction and plan
switches, and how many turns came before (/history shows them); help as a
list with the session's own commands, a completion menu on `/`, the
settings shown by their commands, the model in the toolbar from the start."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pyte
import pytest

from clients.cli.chat_commands import HOST_EXAMPLES, OWN_COMMANDS
from clients.sdk import AgentHostClient, Session
from tests.integration.test_cli import (
    CPR_ANSWER,
    CPR_REQUEST,
    TIMEOUT_S,
    Up,
    answering_cpr,
    running_up,
)
from tests.support.hosts import REPO

COLUMNS = 120


class Screen:
    """What a person sees of the chat: its output played on a terminal
    emulator that keeps the rows scrolled off the top, and the raw output
    (for what shows only for a moment, like a spinner)."""

    def __init__(self, rows: int) -> None:
        self.screen = pyte.HistoryScreen(COLUMNS, rows, history=5000)
        self.stream = pyte.Stream(self.screen)
        self.raw: list[str] = []

    # pexpect's logfile_read
    def write(self, data: str) -> None:
        self.raw.append(data)
        self.stream.feed(data)

    def flush(self) -> None:
        pass

    def rows(self) -> list[str]:
        """Every row written so far, the scrolled-off ones first, blank ones left out."""
        top = [
            "".join(row[x].data for x in range(COLUMNS)).rstrip() for row in self.screen.history.top
        ]
        rows = top + [line.rstrip() for line in self.screen.display]
        return [row for row in rows if row.strip()]

    def count(self, text: str) -> int:
        return sum(row.count(text) for row in self.rows())

    def after(self, row: str, until: str = ">") -> list[str]:
        """The rows after the last row `row`, up to one starting with `until`."""
        rows = self.rows()
        start = len(rows) - rows[::-1].index(row)
        end = next((i for i in range(start, len(rows)) if rows[i].startswith(until)), len(rows))
        return rows[start:end]

    def output(self) -> str:
        return "".join(self.raw)


def menu_of(screen: Screen, prompt: str) -> list[str]:
    """The commands of the completion menu under the prompt row `prompt`."""
    display = screen.screen.display
    rows = next((i for i, r in enumerate(display) if r.startswith(prompt)), len(display))
    return [r.split()[0] for r in display[rows + 1 :] if r.strip().startswith("/")]


def shown_until(child: pexpect.spawn[str], condition: Callable[[], bool]) -> None:
    """Read what the chat writes until `condition` holds of the screen
    (answering cursor position requests); fails after TIMEOUT_S."""
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, "the screen never showed it"
        with contextlib.suppress(pexpect.TIMEOUT):
            if CPR_REQUEST in child.read_nonblocking(4096, timeout=0.5):
                child.send(CPR_ANSWER)


def spawn_chat(
    up: Up, project: Path, *args: str, rows: int = 60, env: dict[str, str] | None = None
) -> tuple[pexpect.spawn[str], Screen]:
    screen = Screen(rows)
    child = pexpect.spawn(
        sys.executable,
        [
            "-m",
            "clients.cli",
            "chat",
            "--data-dir",
            str(up.data_dir),
            "--workspace",
            str(project),
            *args,
        ],
        cwd=str(REPO),
        env=env or up.env,
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(rows, COLUMNS),
    )
    child.logfile_read = screen
    return child, screen


def leave(child: pexpect.spawn[str]) -> None:
    if child.isalive():
        child.sendcontrol("u")  # whatever a failed test left typed
        child.sendline("/quit")
    # A terminal answers cursor position requests (a prompt waits for them).
    while child.expect_exact([pexpect.EOF, CPR_REQUEST]) == 1:
        child.send(CPR_ANSWER)
    child.close()
    assert child.exitstatus == 0


# -- item 7: a working turn ---------------------------------------------------------------

LIST = "".join(f"- item {n} with `code`\n" for n in range(30))
WORK = {
    "replies": [
        {
            "text": "Let me change it.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "args": {"path": "app.py", "old_string": "return 1", "new_string": "return 2"},
                }
            ],
        },
        {
            "text": "Running it.",
            "tool_calls": [{"name": "shell", "args": {"command": "seq 1 30; exit 1"}}],
        },
        # Markdown, streamed: a list taller than the screen, then a last line.
        {
            "text": f"The **fix** is in.\n\n{LIST}\nAll done.",
            "parts": 40,
            "delta_s": 0.02,
        },
        {"text": "The summary /compact asks the model for."},
        {
            "text": "Trying quietly.",
            "tool_calls": [{"name": "shell", "args": {"command": "false"}}],
        },
        {"text": "It failed quietly."},
        {"text": "This will take a while", "hold_s": 60},
    ]
}
APP = "def answer():\n    return 1\n\n\nprint(answer())\n"


@pytest.fixture
def working(tmp_path: Path) -> Iterator[Up]:
    with running_up(tmp_path, WORK) as running:
        yield running


def test_a_working_turn_shows_each_thing_once(working: Up, tmp_path: Path) -> None:
    up = working
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text(APP)
    # A screen of 24 rows: the answer's list does not fit on it.
    child, screen = spawn_chat(up, project, rows=24)
    try:
        child.expect_exact(">")
        child.sendline("fix it")
        child.expect_exact("Allow edit app.py?")
        child.expect_exact("allow>")
        # The approval's choices say how they differ (a line breaks between two).
        assert screen.rows()[-3:-1] == [
            "[y] yes, once  [a] yes, for this session  "
            "[s] always, in this session (a rule /permissions lists)",
            "[w] always, in every session of this folder  [n] no",
        ]
        child.sendline("y")
        child.expect_exact("Allow $ seq 1 30; exit 1?")
        child.expect_exact("allow>")
        child.sendline("y")
        child.expect_exact("All done.")
        child.expect_exact(">")
        # The change's diff once (in its approval), its result line once.
        assert screen.count("+    return 2") == 1
        assert screen.count("· edit app.py (+1 -1)") == 1
        # The command once (its approval's title), its output folded to its
        # first lines, how it ended once, without the model's status line.
        assert screen.count("seq 1 30; exit 1") == 1
        rows = screen.rows()
        assert [n for n in range(1, 31) if str(n) in rows] == list(range(1, 9))
        assert screen.count("… 22 more lines (/output shows all)") == 1
        assert screen.count("· exit 1") == 1 and screen.count("exit code") == 0
        # The answer once, rendered where its blocks fit (the list does not).
        assert screen.count("The fix is in.") == 1 and screen.count("**fix**") == 0
        for n in range(30):
            assert screen.count(f"item {n} with") == 1, n
        assert screen.count("All done.") == 1
        # No spinner once the answer is there.
        assert "thinking" not in screen.output().split("All done.")[-1]

        # /output shows what was folded, once.
        child.sendline("/output")
        child.expect_exact("30")
        child.expect_exact(">")
        assert screen.after("> /output") == ["$ seq 1 30; exit 1", *map(str, range(1, 31))]

        # /plan, /plan off and /compact: one line each.
        child.sendline("/plan")
        child.expect_exact("plan: on")
        child.sendline("/plan off")
        child.expect_exact("plan: off")
        child.sendline("/compact")
        child.expect_exact("── conversation compacted (")
        child.sendline("/approvals never")
        child.expect_exact("approvals: never")
        assert screen.after("> /plan") == ["plan: on"]
        assert screen.after("> /plan off") == ["plan: off"]
        [compacted] = screen.after("> /compact")
        assert re.fullmatch(r"── conversation compacted \(\S+ → \S+ tokens\) ──", compacted)

        # A command that printed nothing and asked nothing: one line.
        child.sendline("quietly")
        child.expect_exact("It failed quietly.")
        child.expect_exact(">")
        assert screen.after("> quietly") == [
            "assistant: Trying quietly.",
            "· $ false (exit 1)",
            "assistant: It failed quietly.",
        ]

        child.sendline("something long")
        child.expect_exact("This will take a while")
        child.sendcontrol("d")  # leave; the turn goes on
        child.expect(pexpect.EOF)
    finally:
        child.close()

    # Back to the running turn, then cancelled: its answer shows once, not
    # again when the cancel logs what it had said.
    child, screen = spawn_chat(up, project, "--continue")
    try:
        child.expect_exact("This will take a while")
        child.sendintr()
        child.expect_exact("turn cancelled")
        child.expect_exact(">")
        assert screen.count("This will take a while") == 1
        assert screen.count("turn cancelled") == 1
    finally:
        leave(child)


# -- item 8: a session's past --------------------------------------------------------------

PAST = {
    "replies": [
        {"text": "Looking.", "tool_calls": [{"name": "read_file", "args": {"path": "app.py"}}]},
        {"text": "Running.", "tool_calls": [{"name": "shell", "args": {"command": "echo hi"}}]},
        {
            "text": "Cleaning.",
            "tool_calls": [{"name": "shell", "args": {"command": "rm -rf build"}}],
        },
        {"text": "Denied, fine."},
        {"text": "A long one", "hold_s": 60},
    ]
}
ECHO_TURNS = 30  # 60 messages: more than the chat's first page holds


@pytest.fixture
def past(tmp_path: Path) -> Iterator[Up]:
    with running_up(tmp_path, PAST) as running:
        yield running


async def _make_a_past(up: Up, project: Path) -> None:
    """A session with a turn with tools (a command denied), a cancelled
    one, many short ones, a compaction, two plan switches and a last one."""
    token = (up.data_dir / "token").read_text().strip()
    async with AgentHostClient(up.gateway, token) as client:
        workspace = await client.create_workspace(str(project))
        reusable = await client.connect_workspace(workspace.id)
        session = await client.open_session(reusable.session.id)
        await session.set_settings(approvals="ask-for-commands")
        await _turn(session, "look around")
        await session.prompt("long")
        await session.wait_until(lambda s: bool(s.live.texts), TIMEOUT_S)
        await session.cancel()
        await session.wait_until(lambda s: not s.running, TIMEOUT_S)
        for n in range(ECHO_TURNS):
            await _turn(session, f"echo {n}")
        assert (await session.execute_command("compact")).ok
        await session.set_plan(True)
        await session.set_plan(False)
        await _turn(session, "last")


async def _turn(session: Session, text: str) -> None:
    """One turn, its questions answered: commands allowed, `rm` denied."""
    await session.prompt(text)
    await session.wait_until(lambda s: s.running, TIMEOUT_S)
    while session.running:
        await session.wait_until(lambda s: not s.running or bool(s.questions), TIMEOUT_S)
        for question in list(session.questions.values()):
            if question.approval is not None and "rm" in question.approval.summary:
                await session.answer_question(question.question_id, deny="not now")
            else:
                await session.answer_question(question.question_id, allow_once=True)
            await _until_closed(session, question.question_id)


async def _until_closed(session: Session, question_id: str) -> None:
    await session.wait_until(lambda s: question_id not in s.questions, TIMEOUT_S)


def test_continue_shows_whole_turns_compactly_and_how_many_came_before(
    past: Up, tmp_path: Path
) -> None:
    up = past
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text(APP)
    asyncio.run(_make_a_past(up, project))
    turns = ECHO_TURNS + 3
    child, screen = spawn_chat(up, project, "--continue")
    try:
        child.expect_exact("sandbox: ")
        child.expect_exact(">")
        rows = screen.rows()
        # The last three turns, whole, and how many came before (counted
        # past the first page the chat reads).
        hint = rows.index(f"── {turns - 3} earlier turns: /history shows them ──")
        shown = rows[hint + 1 : rows.index("plan: off")]
        last = ECHO_TURNS - 1
        assert shown[:4] == [
            f"you: echo {last - 1}",
            f"assistant: Echo: echo {last - 1}",
            f"you: echo {last}",
            f"assistant: Echo: echo {last}",
        ], shown
        # The compaction and the plan switches between two turns, in their place.
        assert re.fullmatch(r"── conversation compacted \(\S+ → \S+ tokens\) ──", shown[4])
        assert shown[5:] == ["plan mode on", "plan mode off", "you: last", "assistant: Echo: last"]

        # /history: the turns before, a tool call a line, a denial and a cancel as such.
        child.sendline(f"/history {turns - 3}")
        child.expect_exact("── the first turn ──")
        child.expect_exact(">")
        earlier = screen.after(f"> /history {turns - 3}")
        assert earlier[:12] == [
            f"── turns 1 to {turns - 3} of {turns} ──",
            "you: look around",
            "assistant: Looking.",
            "· read app.py",
            "assistant: Running.",
            "· $ echo hi (exit 0)",
            "assistant: Cleaning.",
            "· $ rm -rf build: denied (not now)",
            "assistant: Denied, fine.",
            "you: long",
            "assistant: A long one",
            "turn cancelled",
        ], earlier
        assert earlier[12:14] == ["you: echo 0", "assistant: Echo: echo 0"]
        assert earlier[-1] == "── the first turn ──"
        child.sendline("/history")
        child.expect_exact("no earlier turns")
    finally:
        leave(child)


# -- item 9: help and discovery -----------------------------------------------------------


@pytest.fixture
def echoing(tmp_path: Path) -> Iterator[Up]:
    with running_up(tmp_path, None) as running:
        yield running


def test_chat_help_lists_one_command_a_line() -> None:
    # On an 80-column terminal, each on a line of its own with what it does.
    helped = subprocess.run(
        [sys.executable, "-m", "clients.cli", "chat", "--help"],
        cwd=REPO,
        env={**os.environ, "COLUMNS": "80", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    lines = [line.strip(" │") for line in helped.stdout.splitlines()]
    for command in [*HOST_EXAMPLES, *OWN_COMMANDS]:
        assert any(
            line.startswith(command.usage) and line.endswith(command.description) for line in lines
        ), (command, helped.stdout)


async def _session_commands(up: Up, project: Path) -> list[tuple[str, str]]:
    token = (up.data_dir / "token").read_text().strip()
    async with AgentHostClient(up.gateway, token) as client:
        workspace = await client.create_workspace(str(project))
        session_id = (await client.connect_workspace(workspace.id)).session.id
        return [(c.usage, c.description) for c in await client.list_commands(session_id)]


def test_help_completion_settings_and_the_model_are_found_in_the_chat(
    echoing: Up, tmp_path: Path
) -> None:
    up = echoing
    project = tmp_path / "project"
    project.mkdir()
    child, screen = spawn_chat(up, project, env=answering_cpr(up))

    def expect(text: str) -> None:
        while child.expect_exact([text, CPR_REQUEST]) == 1:
            child.send(CPR_ANSWER)

    try:
        # The toolbar names the model from the start: the default one.
        expect("approvals: ask · model: builtin · shift-tab")

        # /help: the session's commands as the host lists them, one a row.
        child.sendline("/help")
        expect("Keys:")
        expect(">")
        rows = screen.after("> /help")
        for usage, description in asyncio.run(_session_commands(up, project)):
            # Its row: the usage, then what it does (wrapped in its column).
            assert any(r.strip().startswith(usage) and description[:40] in r for r in rows), (
                usage,
                rows,
            )
        for command in OWN_COMMANDS:
            assert any(r.strip().startswith(command.usage) for r in rows), command

        # `/` opens a menu of the commands (the session's with their descriptions).
        child.send("/")
        expect("Summarise the conversation so far")
        expect("/permissions")
        child.send("pe")
        # The menu narrows to the one command starting so.
        shown_until(child, lambda: menu_of(screen, "> /pe") == ["/permissions"])
        child.sendcontrol("u")

        # The settings' commands without a value say the value and the choices.
        child.sendline("/sandbox")
        expect("sandbox: workspace-write  (choices: read-only, workspace-write, full)")
        child.sendline("/approvals")
        expect("approvals: ask  (choices: ask, ask-for-commands, never)")
        child.sendline("/network")
        expect("network: off  (choices: on, off)")
        child.sendline("/model")
        expect("* builtin")
        expect("(default)")
        expect(">")

        # The turns of this chat are on screen: /history has none before them.
        child.sendline("hello")
        expect("assistant: Echo: hello")
        child.sendline("/history")
        expect("no earlier turns")
        expect(">")
        assert screen.count("you: hello") == 0  # typed here, not echoed again
    finally:
        leave(child)
