"""The `agenthost` CLI as a person uses it: `agenthost up` runs the stack in
its own process (its built-in model scripted to present a markdown plan), and
`agenthost chat` is driven in a real terminal (a pty, through pexpect)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest

from tests.support.hosts import REPO

TIMEOUT_S = 30


def plan_call(plan: str) -> list[dict[str, object]]:
    return [{"name": "exit_plan_mode", "args": {"plan": plan}}]


# The built-in model's replies, one per model request, in order.
SCRIPT = {
    "replies": [
        # A coding turn: read, edit (approved once), run (allowed for the session).
        {
            "text": "Let me look at the code first.",
            "hold_s": 4,
            "tool_calls": [{"name": "read_file", "args": {"path": "app.py"}}],
        },
        {
            "text": "Found it.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "args": {"path": "app.py", "old_string": "return 1", "new_string": "return 2"},
                }
            ],
        },
        {
            "text": "Running it.",
            "tool_calls": [{"name": "shell", "args": {"command": "python3 app.py && echo ran-ok"}}],
        },
        {"text": "All done."},
        # A long answer that Ctrl-C cancels.
        {"text": "This will take a while", "hold_s": 60},
        # The plan review.
        {
            "text": "Here is my plan.",
            "tool_calls": plan_call("# Plan\n\n1. Step one: the parser\n2. Step two: the tests"),
        },
        {"text": "Implementing the plan now."},
        {"text": "Second plan.", "tool_calls": plan_call("# Second plan\n\n- Write tests")},
        {
            "text": "Revised plan.",
            "tool_calls": plan_call("# Revised plan\n\n- Write tests\n- Handle empty input"),
        },
        {"text": "Understood, waiting for your message."},
    ]
}


@dataclass
class Up:
    gateway: str
    data_dir: Path
    env: dict[str, str]

    def cli(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clients.cli", *args],
            cwd=REPO,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )


def _read_up(
    process: subprocess.Popen[str], found: list[dict[str, str]], done: threading.Event
) -> None:
    """Read `up`'s output: `done` at its JSON line (or its end); keep draining."""
    assert process.stdout is not None
    for line in process.stdout:
        if not found and line.startswith('{"agenthost": "up"'):
            found.append(dict(json.loads(line)["addresses"]))
            done.set()
    done.set()


@contextmanager
def running_up(
    tmp_path: Path,
    script: Mapping[str, object] | None,
    *flags: str,
    env: Mapping[str, str] | None = None,
) -> Iterator[Up]:
    """`agenthost up` in its own process, its built-in model scripted (or
    echoing), with more `flags` and `env` when given."""
    # `up` keeps its data in the per-user state folder (here a temporary one).
    data_dir = tmp_path / "state" / "agenthost"
    env = {
        **os.environ,
        **(env or {}),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "NO_COLOR": "1",
        "TERM": "xterm",
        # pexpect's terminal does not answer cursor position requests.
        "PROMPT_TOOLKIT_NO_CPR": "1",
    }
    for name in ("AGENTHOST_TOKEN", "AGENTHOST_DATA_DIR", "AGENTHOST_BUILTIN_SCRIPT"):
        env.pop(name, None)
    if script is not None:
        path = tmp_path / "script.json"
        path.write_text(json.dumps(script))
        env["AGENTHOST_BUILTIN_SCRIPT"] = str(path)
    process = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "up", "--free-ports", *flags],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found: list[dict[str, str]] = []
    done = threading.Event()
    reader = threading.Thread(target=_read_up, args=(process, found, done), daemon=True)
    reader.start()
    try:
        done.wait(TIMEOUT_S)
        assert found, f"agenthost up did not come up (exit {process.poll()})"
        addresses = found[0]
        yield Up(addresses["gateway"], data_dir, {**env, "AGENTHOST_GATEWAY": addresses["gateway"]})
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        reader.join(TIMEOUT_S)


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    with running_up(tmp_path, SCRIPT) as running:
        yield running


@pytest.fixture
def echoing(tmp_path: Path) -> Iterator[Up]:
    with running_up(tmp_path, None) as running:
        yield running


def chat(up: Up, *args: str, env: Mapping[str, str] | None = None) -> pexpect.spawn[str]:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "clients.cli", "chat", "--data-dir", str(up.data_dir), *args],
        cwd=str(REPO),
        env=dict(env or up.env),
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(60, 200),
    )
    child.logfile_read = open(os.environ.get("CHAT_LOG", os.devnull), "a")  # noqa: SIM115
    return child


def expect_all(child: pexpect.spawn[str], *texts: str) -> None:
    """Each text shows up, in whatever order (lines from the live stream and
    from replies can interleave)."""
    waiting = list(texts)
    while waiting:
        index = child.expect_exact(waiting)
        waiting.pop(index)


def events_of(up: Up, session_id: str) -> list[str]:
    """The kinds of a session's logged events, read through the gateway."""
    import asyncio

    from agenthost.gateway.v1 import gateway_pb2 as gw

    from clients.sdk import AgentHostClient

    async def read() -> list[str]:
        token = (up.data_dir / "token").read_text().strip()
        async with AgentHostClient(up.gateway, token) as client:
            reply = await client.call(
                client.stub.OpenSession, gw.OpenSessionRequest(session_id=session_id)
            )
            return [e.WhichOneof("body") or "" for e in reply.events]

    return asyncio.run(read())


def only_session(up: Up) -> str:
    listed = up.cli("sessions", "list", "--json", "--data-dir", str(up.data_dir))
    sessions = json.loads(listed.stdout)
    assert len(sessions) == 1, listed.stdout
    return str(sessions[0]["id"])


def test_chat_streams_the_work_asks_approvals_and_cancels(up: Up, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("def answer():\n    return 1\n\nprint(answer())\n")
    child = chat(up, "--workspace", str(project))
    try:
        child.expect_exact("plan: off")
        child.expect_exact(">")
        child.sendline("fix the answer")
        # The text shows while the step still runs (the model holds it open).
        child.expect_exact("assistant: Let me look at the code first.")
        assert "assistant_message" not in events_of(up, only_session(up))
        child.expect_exact("· read app.py")
        child.expect_exact("Allow edit app.py?")
        child.expect_exact("+    return 2")  # the change, shown in its approval
        child.expect_exact("allow>")
        # The session list shows what the session waits for.
        table = up.cli("sessions", "list", "--data-dir", str(up.data_dir)).stdout
        assert "[running, waiting for approval]" in table, table
        child.sendline("y")
        expect_all(child, "allowed once", "· edit app.py (+1 -1)")
        child.expect_exact("Allow $ python3 app.py && echo ran-ok?")
        child.expect_exact("allow>")
        child.sendline("a")
        child.expect_exact("allowed for this session")
        # The command's output streams below its approval, then how it ended.
        child.expect_exact("ran-ok")
        child.expect_exact("· exit 0")
        child.expect_exact("assistant: All done.")
        assert (project / "app.py").read_text().count("return 2") == 1

        # A long answer: Ctrl-C cancels the turn, cleanly; a line typed
        # while it ran is kept and taken once it is over.
        child.expect_exact(">")
        child.sendline("now something long")
        child.expect_exact("This will take a while")
        child.sendline("/quit")
        child.sendintr()
        expect_all(child, "cancelling the turn", "turn cancelled")
        child.expect_exact("> /quit")
        child.expect_exact("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before


def test_piped_chat_that_ends_at_a_denials_reason_denies_and_leaves(up: Up, tmp_path: Path) -> None:
    """A script pipes a prompt and `n` to an approval; its input ends where
    the reason would be typed: the call is denied without one and the chat
    leaves, rather than waiting for a line that will never come."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("def answer():\n    return 1\n\nprint(answer())\n")
    done = subprocess.run(
        [sys.executable, "-m", "clients.cli", "chat", "--data-dir", str(up.data_dir)],
        cwd=project,
        env=up.env,
        input="fix the answer\nn\n",
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "denied" in done.stdout and "bye" in done.stdout
    assert (project / "app.py").read_text().count("return 1") == 1


def chat_in_the_long_turn(up: Up, tmp_path: Path) -> pexpect.spawn[str]:
    """A chat in a new project past the script's coding turn (approvals off),
    in its long answer, which runs until cancelled."""
    project = tmp_path / "project"
    project.mkdir()
    child = chat(up, "--workspace", str(project))
    child.expect_exact("plan: off")
    child.expect_exact(">")
    child.sendline("/approvals never")
    child.expect_exact("approvals: never")
    child.sendline("warm up")
    child.expect_exact("assistant: All done.")
    child.sendline("long")
    child.expect_exact("This will take a while")
    return child


def test_while_a_turn_runs_shift_tab_switches_plan_mode_and_ctrl_d_leaves(
    up: Up, tmp_path: Path
) -> None:
    child = chat_in_the_long_turn(up, tmp_path)
    try:
        child.send("\x1b[Z")  # Shift-Tab, with no prompt shown
        child.expect_exact("plan: off → on (pending)")
        child.sendcontrol("d")
        expect_all(child, "the turn goes on", "bye")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    table = up.cli("sessions", "list", "--data-dir", str(up.data_dir)).stdout
    assert "[running]" in table, table


def test_chat_through_plan_mode_and_a_plan_review(up: Up, tmp_path: Path) -> None:
    project = tmp_path / "project"
    child = chat_in_the_long_turn(up, tmp_path)
    try:
        child.sendintr()
        child.expect_exact("turn cancelled")

        child.sendline("/plan")
        child.expect_exact("plan: on")

        child.sendline("Design the feature")
        expect_all(child, "Review the plan", "Step one: the parser", "Step two: the tests")
        child.expect_exact("[a] approve  [k] keep planning  [d] dismiss")
        child.expect_exact("choice>")
        table = up.cli("sessions", "list", "--data-dir", str(up.data_dir)).stdout
        assert "[running, waiting for review]" in table, table

        # While the review waits, the turn is running: /plan off is pending.
        child.sendline("/plan off")
        expect_all(child, "plan: on → off (pending)", "choice>")

        child.sendline("a")
        expect_all(child, "plan approved", "plan: off", "assistant: Implementing the plan now.")

        # /plan <message>: plan mode, then the message; keep planning with feedback.
        child.sendline("/plan Add a test plan")
        expect_all(child, "plan: on", "you: Add a test plan", "Second plan", "Write tests")
        child.expect_exact("choice>")
        child.sendline("k")
        child.expect_exact("feedback>")
        child.sendline("Cover the edge cases")
        expect_all(child, "sent your feedback", "Revised plan", "Handle empty input")
        child.expect_exact("choice>")

        # Dismissed: the agent stays in plan mode and waits.
        child.sendline("d")
        expect_all(child, "review dismissed", "assistant: Understood, waiting for your message.")

        child.sendline("/plan off")
        child.expect_exact("plan: off")

        # At the prompt: a first Ctrl-C only warns, Ctrl-D leaves.
        child.sendintr()
        child.expect_exact("Ctrl-C again or Ctrl-D to leave")
        child.expect_exact(">")  # the prompt is back (and reads keys again)
        child.sendeof()
        child.expect_exact("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before

    # The same session, seen by the non-interactive commands.
    listed = up.cli("sessions", "list", "--json", "--data-dir", str(up.data_dir))
    assert listed.returncode == 0, listed.stderr
    sessions = json.loads(listed.stdout)
    assert len(sessions) == 1 and sessions[0]["cwd"] == str(project.resolve())
    shown = up.cli("plan", "get", sessions[0]["id"], "--data-dir", str(up.data_dir))
    assert shown.stdout.strip() == "plan: off"


def test_workspace_session_and_plan_commands(up: Up, tmp_path: Path) -> None:
    data = ("--data-dir", str(up.data_dir))
    project = tmp_path / "some project"
    project.mkdir()
    added = up.cli("workspace", "add", str(project), *data)
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("workspace w-") and str(project) in added.stdout
    again = up.cli("workspace", "add", str(project), "--json", *data)
    workspace = json.loads(again.stdout)
    assert workspace["path"] == str(project.resolve()) and workspace["id"] in added.stdout

    # Only a folder makes a workspace: the CLI says why not in one line.
    (project / "notes.txt").write_text("a file\n")
    refused = {
        str(project / "not yet"): "does not exist",
        str(project / "notes.txt"): "is not a folder",
        "/": "is the root of the file system; choose a project folder",
    }
    for path, why in refused.items():
        answer = up.cli("workspace", "add", path, *data)
        assert answer.returncode == 2 and answer.stdout == ""
        assert answer.stderr.splitlines() == [f"error: {path} {why}"], answer.stderr

    listed = up.cli("workspace", "list", *data)
    assert f"{workspace['id']}  {project.resolve()}  (0 active sessions)" in listed.stdout
    assert len(listed.stdout.strip().splitlines()) == 1
    assert up.cli("sessions", "list", *data).stdout.startswith("no sessions yet")

    # A session (chat makes one; here a chat that leaves at once).
    child = chat(up, "--workspace", str(project))
    try:
        child.expect_exact("plan: off")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    sessions = json.loads(up.cli("sessions", "list", "--json", *data).stdout)
    assert len(sessions) == 1 and sessions[0]["blank"]
    session_id = sessions[0]["id"]
    assert session_id in up.cli("sessions", "list", "--workspace", str(project), *data).stdout

    assert up.cli("plan", "get", session_id, *data).stdout.strip() == "plan: off"
    assert up.cli("plan", "set", session_id, "on", *data).stdout.strip() == "plan: on (committed)"
    assert up.cli("plan", "set", session_id, "on", *data).stdout.strip() == "plan: on (noop)"
    got = json.loads(up.cli("plan", "get", session_id, "--json", *data).stdout)
    assert got["active"] is True and got["pending"] is None
    assert up.cli("plan", "set", session_id, "maybe", *data).returncode == 2

    # The token from --token / AGENTHOST_TOKEN instead of the file.
    token = (up.data_dir / "token").read_text().strip()
    elsewhere = ("--data-dir", str(tmp_path / "nowhere"))
    assert up.cli("plan", "get", session_id, "--token", token, *elsewhere).returncode == 0
    env = {**up.env, "AGENTHOST_TOKEN": token}
    assert up.cli("plan", "get", session_id, *elsewhere, env=env).stdout.strip() == "plan: on"
    missing = up.cli("plan", "get", session_id, *elsewhere)
    assert missing.returncode == 2 and "no token" in missing.stderr
    wrong = up.cli("plan", "get", session_id, "--token", "not-the-token", *elsewhere)
    assert wrong.returncode == 1 and "UNAUTHENTICATED" in wrong.stderr
    unknown = up.cli("plan", "get", "s-nope", *data)
    assert unknown.returncode == 1 and "SESSION_NOT_FOUND" in unknown.stderr


def test_the_cli_works_from_any_folder_and_chats_in_its_workspace(up: Up, tmp_path: Path) -> None:
    far = tmp_path / "far" / "away" / "project"
    far.mkdir(parents=True)
    agenthost = str(Path(sys.executable).parent / "agenthost")
    # No --data-dir, no token: both come from the per-user state folder.
    listed = subprocess.run(
        [agenthost, "workspace", "list"],
        cwd=far,
        env=up.env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("no workspaces yet")
    # Another folder's workspace, the most recent one: chat must not land there.
    other = tmp_path / "other"
    other.mkdir()
    added = subprocess.run(
        [agenthost, "workspace", "add", str(other)],
        cwd=far,
        env=up.env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert added.returncode == 0, added.stderr
    child = pexpect.spawn(
        agenthost,
        ["chat"],
        cwd=str(far),
        env=up.env,
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(60, 200),
    )
    try:
        child.expect_exact(f"added a workspace for {far.resolve()}")
        child.expect_exact(f"in {far.resolve()}")
        child.expect_exact(">")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    workspaces = json.loads(
        subprocess.run(
            [agenthost, "workspace", "list", "--json"],
            cwd=far,
            env=up.env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        ).stdout
    )
    assert sorted(w["path"] for w in workspaces) == sorted([str(far.resolve()), str(other)])
    chatted = next(w for w in workspaces if w["path"] == str(far.resolve()))
    assert len(chatted["sessions"]) == 1, chatted


def test_a_custom_command_runs_with_its_arguments(echoing: Up, tmp_path: Path) -> None:
    """A prompt file of the project, as Claude Code users write it, is a
    command of the chat: typed with arguments, its prompt reaches the model
    (the built-in model echoes what it was sent); /commands lists it."""
    project = tmp_path / "project"
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "review.md").write_text(
        "---\ndescription: Review a file for one concern\nargument-hint: FILE CONCERN\n---\n"
        "Review $1, looking for $2 only.\n"
    )
    child = chat(echoing, "--workspace", str(project))
    try:
        child.expect_exact(">")
        child.sendline("/review app.py typos")
        child.expect_exact("you: Review app.py, looking for typos only.")
        child.expect_exact("assistant: Echo: Review app.py, looking for typos only.")
        child.sendline("/commands")
        child.expect(r"/review FILE CONCERN +\.claude/commands/review\.md")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()


def test_sessions_are_found_managed_and_resumed(echoing: Up, tmp_path: Path) -> None:
    up = echoing
    project = tmp_path / "project"
    project.mkdir()
    data = ("--data-dir", str(up.data_dir))

    def talk(*args: str, text: str) -> None:
        child = chat(up, "--workspace", str(project), *args)
        try:
            child.expect_exact(">")
            child.sendline(text)
            child.expect_exact(f"assistant: Echo: {text}")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()

    talk(text="the parser")
    talk(text="the docs")
    rows = json.loads(up.cli("sessions", "list", "--json", *data).stdout)
    assert [r["title"] for r in rows if not r["blank"]] == ["the docs", "the parser"]
    table = up.cli("sessions", "list", *data).stdout
    assert "the docs  (just now)  — Echo: the docs" in table
    docs, parser = (r["id"] for r in rows if not r["blank"])

    # --continue: the most recent session; --resume: pick one.
    child = chat(up, "--workspace", str(project), "--continue")
    try:
        child.expect_exact(f"session {docs}")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    child = chat(up, "--workspace", str(project), "--resume")
    try:
        # Each with its title, time and last message.
        child.expect_exact("1. ")
        child.expect_exact("the docs  (just now)  — Echo: the docs")
        child.expect_exact("2. ")
        child.expect_exact("the parser  (just now)  — Echo: the parser")
        child.expect_exact("resume which?")
        child.sendline("2")
        child.expect_exact(f"session {parser}")
        child.expect_exact("you: the parser")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()

    renamed = up.cli("sessions", "rename", parser, "Parser work", *data)
    assert renamed.returncode == 0 and "Parser work" in renamed.stdout
    assert "[archived]" in up.cli("sessions", "archive", parser, *data).stdout
    assert parser not in up.cli("sessions", "list", *data).stdout
    assert parser in up.cli("sessions", "list", "--archived", *data).stdout
    assert "(1 active session, 1 archived)" in up.cli("workspace", "list", *data).stdout
    up.cli("sessions", "unarchive", parser, *data)
    assert parser in up.cli("sessions", "list", *data).stdout
    forked = up.cli("sessions", "fork", parser, *data)
    assert forked.returncode == 0 and "Parser work (fork)" in forked.stdout
    exported = up.cli("sessions", "export", parser, *data).stdout.splitlines()
    assert any(
        json.loads(line).get("userMessage", {}).get("text") == "the parser" for line in exported
    )
    assert up.cli("sessions", "delete", docs, "--yes", *data).returncode == 0
    assert docs not in up.cli("sessions", "list", *data).stdout
    gone = up.cli("sessions", "export", docs, *data)
    assert gone.returncode == 1 and "SESSION_NOT_FOUND" in gone.stderr


def test_sessions_are_searched_and_the_resume_picker_filters_by_words(
    echoing: Up, tmp_path: Path
) -> None:
    """`sessions search` prints the sessions whose words match, with a
    snippet (the match bold in a terminal); typing words at the resume
    picker's question offers the sessions found instead of the recent ones."""
    up = echoing
    project = tmp_path / "project"
    project.mkdir()
    data = ("--data-dir", str(up.data_dir))

    def talk(*texts: str) -> None:
        child = chat(up, "--workspace", str(project))
        try:
            for text in texts:
                child.expect_exact(">")
                child.sendline(text)
                child.expect_exact(f"assistant: Echo: {text}")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()

    talk("fix the parser", "add tests", "then tidy the tokenizer module")
    talk("write the docs")
    rows = json.loads(up.cli("sessions", "list", "--json", *data).stdout)
    docs, parser = (r["id"] for r in rows if not r["blank"])

    found = up.cli("sessions", "search", "tokenizer", *data)
    assert found.returncode == 0, found.stderr
    (hit,) = found.stdout.splitlines()
    assert hit.startswith(f"{parser}  fix the parser  (just now)  — ")
    assert "then tidy the tokenizer module" in hit
    as_json = json.loads(up.cli("sessions", "search", "docs", "--json", *data).stdout)
    assert [h["id"] for h in as_json] == [docs]
    assert {"text": "docs", "highlighted": True} in as_json[0]["snippet"]
    nothing = up.cli("sessions", "search", "kumquat", "--workspace", str(project), *data)
    assert nothing.stdout.strip() == "no session matches 'kumquat'"
    refused = up.cli("sessions", "search", "?!", *data)
    assert refused.returncode == 1 and "INVALID_REQUEST" in refused.stderr
    since = up.cli("sessions", "search", "docs", "--since", "2d", *data)
    assert docs in since.stdout

    # In a terminal the matched words are bold.
    terminal = pexpect.spawn(
        sys.executable,
        ["-m", "clients.cli", "sessions", "search", "tokenizer", *data],
        cwd=str(REPO),
        env=up.env,
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(60, 400),
    )
    try:
        terminal.expect_exact("\x1b[1mtokenizer\x1b[0m")
        terminal.expect(pexpect.EOF)
    finally:
        terminal.close()

    child = chat(up, "--workspace", str(project), "--resume")
    try:
        child.expect_exact("1. ")
        child.expect_exact("write the docs")
        child.expect_exact("resume which?")
        child.sendline("tokenizer")
        child.expect_exact(f" 1. {parser}  fix the parser")
        child.expect_exact("then tidy the \x1b[1mtokenizer\x1b[0m module")
        child.expect_exact("resume which?")
        child.sendline("1")
        child.expect_exact(f"session {parser}")
        child.expect_exact("you: then tidy the tokenizer module")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()


# A turn whose model thinks for a while and then fails, then one that answers.
FAILING = {
    "replies": [
        {"hold_s": 3, "error": {"message": "the provider is overloaded", "status": 529}},
        {"text": "Back again."},
    ]
}


@pytest.fixture
def failing(tmp_path: Path) -> Iterator[Up]:
    with running_up(tmp_path, FAILING) as running:
        yield running


# A terminal's answer to a cursor position request (ESC [ 6 n): row 1, column 1.
CPR_REQUEST, CPR_ANSWER = "\x1b[6n", "\x1b[1;1R"


def answering_cpr(up: Up) -> dict[str, str]:
    """The environment of a terminal that answers cursor position requests,
    as real ones do: prompt_toolkit draws its bottom toolbar only then."""
    return {k: v for k, v in up.env.items() if k != "PROMPT_TOOLKIT_NO_CPR"}


def terminal_expect(child: pexpect.spawn[str]) -> Callable[[str], None]:
    """expect_exact that answers every cursor position request on the way."""

    def expect(text: str) -> None:
        while child.expect_exact([text, CPR_REQUEST]) == 1:
            child.send(CPR_ANSWER)

    return expect


def test_chat_keeps_a_status_line_and_reports_a_failed_turn_in_one_line(
    failing: Up, tmp_path: Path
) -> None:
    up = failing
    project = tmp_path / "project"
    project.mkdir()
    child = chat(up, "--workspace", str(project), env=answering_cpr(up))
    expect = terminal_expect(child)
    try:
        # The status line: plan state and settings, at their defaults.
        expect("plan: off · sandbox: workspace-write · approvals: ask")
        child.sendline("hello?")
        # A spinner while nothing has streamed, then the failure as one line.
        expect("thinking…")
        expect("turn failed: ")
        expect("the provider is overloaded")
        shown = child.before or ""
        assert "Traceback" not in shown and "AioRpcError" not in shown

        child.sendline("/sandbox read-only")
        expect("sandbox: read-only · approvals: ask")
        child.sendline("/approvals")
        expect("approvals: ask  (choices: ask, ask-for-commands, never)")
        child.sendline("/sandbox nope")
        expect("usage: /sandbox read-only|workspace-write|full")
        # The network for confined commands: a logged setting, shown with the others.
        child.sendline("/network on")
        expect("sandbox: read-only, approvals: ask, model: builtin, network: on")
        child.sendline("/network")
        expect("network: on  (choices: on, off)")
        child.sendline("/permissions")
        expect("no permission rules")
        # Shift-Tab toggles plan mode (idle: committed at once), and back.
        child.send("\x1b[Z")
        expect("plan: on · sandbox: read-only")
        child.send("\x1b[Z")
        expect("plan: off · sandbox: read-only")
        child.sendline("again")
        expect("assistant: Back again.")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    session_id = only_session(up)
    kinds = events_of(up, session_id)
    assert kinds.count("plan_mode") == 2 and "session_settings" in kinds

    # --session opens that very session (its history shows), and goes alone.
    child = chat(up, "--session", session_id, env=answering_cpr(up))
    expect = terminal_expect(child)
    try:
        expect(f"session {session_id}")
        expect("you: again")
        expect("plan: off · sandbox: read-only · approvals: ask")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    mixed = up.cli("chat", "--session", session_id, "--continue", "--data-dir", str(up.data_dir))
    assert mixed.returncode == 2 and "--session goes alone" in mixed.stderr


def test_compact_shows_a_marker_live_and_in_history_and_export_keeps_everything(
    echoing: Up, tmp_path: Path
) -> None:
    up = echoing
    project = tmp_path / "project"
    project.mkdir()
    child = chat(up, "--workspace", str(project))
    try:
        child.expect_exact(">")
        child.sendline("remember the parser")
        child.expect_exact("assistant: Echo: remember the parser")
        child.sendline("/compact the parser")
        # The compaction comes as a session event: its marker.
        child.expect_exact("── conversation compacted (")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    session_id = only_session(up)
    child = chat(up, "--workspace", str(project), "--continue")
    try:
        child.expect_exact("you: remember the parser")
        child.expect_exact("── conversation compacted (")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    data = ("--data-dir", str(up.data_dir))
    exported = [
        json.loads(line)
        for line in up.cli("sessions", "export", session_id, *data).stdout.splitlines()
    ]
    assert any(
        line.get("userMessage", {}).get("text") == "remember the parser" for line in exported
    )
    compaction = next(line["compaction"] for line in exported if "compaction" in line)
    assert compaction["trigger"] == "manual" and compaction["focus"] == "the parser"
    assert "model_usage" in events_of(up, session_id)


# A slow answer (a word every 0.4 s, then held), an edit on line 7 of app.py, a long command.
SLOW_THEN_EDIT = {
    "replies": [
        {
            "text": "Alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima",
            "parts": 12,
            "delta_s": 0.4,
            "hold_s": 60,
        },
        {
            "text": "Changing it.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "args": {"path": "app.py", "old_string": "return 1", "new_string": "return 2"},
                }
            ],
        },
        {"text": "Done."},
        {
            "text": "Watching it.",
            "tool_calls": [{"name": "shell", "args": {"command": "echo out-one; sleep 60"}}],
        },
    ]
}
APP = "# app\nimport os\nimport sys\n\n\ndef answer():\n    return 1\n\n\nprint(answer())\n"


@pytest.fixture
def slow_then_edit(tmp_path: Path) -> Iterator[Up]:
    with running_up(tmp_path, SLOW_THEN_EDIT) as running:
        yield running


def test_continue_shows_a_running_turn_from_its_first_word_and_approvals_show_context(
    slow_then_edit: Up, tmp_path: Path
) -> None:
    up = slow_then_edit
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text(APP)
    child = chat(up, "--workspace", str(project))
    try:
        child.expect_exact(">")
        child.sendline("tell me")
        child.expect_exact("assistant: Alpha")
        child.expect_exact("charlie")  # a few words on: the chat reads its keys by now
        child.sendcontrol("d")  # leave; the turn goes on
        expect_all(child, "the turn goes on", "bye")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    child = chat(up, "--workspace", str(project), "--continue")
    try:
        # The text written before this chat opened, from its first word, then the rest.
        child.expect_exact("assistant: Alpha bravo charlie")
        child.expect_exact("kilo lima")
        child.sendintr()
        child.expect_exact("turn cancelled")
        child.expect_exact(">")
        child.sendline("fix it")
        child.expect_exact("Allow edit app.py?")
        # The change in its file: three lines of context, the true line numbers.
        child.expect_exact("@@ -4,7 +4,7 @@")
        child.expect_exact(" def answer():")
        child.expect_exact("-    return 1")
        child.expect_exact("+    return 2")
        child.expect_exact(" print(answer())")
        child.expect_exact("allow>")
        child.sendline("y")
        child.expect_exact("assistant: Done.")
        # A running command: its output so far comes back with the chat too.
        child.sendline("watch it")
        child.expect_exact("allow>")
        # Allowed and left in one burst of keys: the prompt reads them all,
        # and the Ctrl-D after its Enter still leaves.
        child.send("y\r\x04")
        expect_all(child, "the turn goes on", "bye")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert "return 2" in (project / "app.py").read_text()
    child = chat(up, "--workspace", str(project), "--continue")
    try:
        child.expect_exact("$ echo out-one; sleep 60")
        child.expect_exact("out-one")
        child.sendintr()
        child.expect_exact("turn cancelled")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()


def test_up_names_the_model_and_server_it_calls(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "NO_COLOR": "1"}
    for name in ("AGENTHOST_MODEL", "AGENTHOST_MODEL_BASE_URL", "AGENTHOST_BUILTIN_SCRIPT"):
        env.pop(name, None)
    helped = subprocess.run(
        [sys.executable, "-m", "clients.cli", "up", "--help"],
        cwd=REPO,
        env={**env, "COLUMNS": "160"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert "--model-base-url" in helped.stdout and "AGENTHOST_MODEL_API_KEY" in helped.stdout
    server = "http://127.0.0.1:9/v1"
    argv = ["up", "--free-ports", "--model", "small-coder", "--model-base-url", server]
    process = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    warned = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.strip())
            if "cannot be reached" in line:
                warned.set()
        warned.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # Nothing listens there: the stack comes up, and says so at once.
        assert warned.wait(TIMEOUT_S)
        assert f"model        small-coder   <- {server}" in lines, lines
        up_line = next(line for line in lines if line.startswith('{"agenthost": "up"'))
        assert json.loads(up_line)["model"] == {"name": "small-coder", "server": server}
        warning = next(line for line in lines if "cannot be reached" in line)
        assert warning.startswith(f"warning: the model server {server} cannot be reached (")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(TIMEOUT_S)
        reader.join(TIMEOUT_S)
