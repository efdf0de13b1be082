"""Coding turns through the gateway with the SDK: the workspace tools, the
sandbox and the approval policy as a user notices them.

The whole stack runs on loopback (tests.support.gateway); sessions are created
in a real project folder; the scripted built-in model calls the tools. What a
user would notice is checked where they would notice it: the log (tool/call,
tool/result, question/asked, the request headers), the files on disk, the open
questions and settings a client is shown, and what the model was told.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import Approval, shows_plan_policy
from clients.sdk import (
    EventAppended,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutputStreamed,
    PlanState,
    Session,
    Settings,
    Update,
    assistant_texts,
)
from services.agentruntime.models.base import ToolResultMessage
from services.agentruntime.models.builtin import ScriptedReply
from tests.support.coding import (
    WAIT_S,
    Coding,
    answered,
    asked,
    coding_stack,
    finished,
    first_request_with,
    headers,
    question_for,
    result_sent,
    results,
    tool,
    tool_trace,
    turn_ends,
)

CALC = "def add(a, b):\n    return a - b\n"
CHECK = (
    "import sys\n"
    "from calc import add\n"
    "got = add(2, 3)\n"
    "if got != 5:\n"
    "    print(f'FAIL: add(2, 3) returned {got}, expected 5')\n"
    "    sys.exit(1)\n"
    "print('OK: add works')\n"
)


@pytest.fixture
async def coding(tmp_path: Path) -> AsyncIterator[Coding]:
    async with coding_stack(tmp_path) as stack:
        yield stack


# -- 1. a whole coding session -------------------------------------------------------------


async def test_a_scripted_coding_session_reads_greps_edits_and_runs_until_green(
    coding: Coding,
) -> None:
    (coding.folder / "calc.py").write_text(CALC)
    (coding.folder / "check.py").write_text(CHECK)
    session = await coding.session(approvals="never")
    coding.script(
        [
            tool("read_file", "read-1", path="calc.py"),
            tool("grep", "grep-1", pattern=r"return a\b"),
        ],
        tool("edit_file", "edit-1", path="calc.py", old_string="a - b", new_string="a * b"),
        tool("shell", "run-1", command="python3 check.py"),
        tool("edit_file", "edit-2", path="calc.py", old_string="a * b", new_string="a + b"),
        tool("shell", "run-2", command="python3 check.py"),
        final="add is fixed; check.py passes.",
    )
    await session.prompt("fix add so that check.py passes")
    await finished(session)

    events = session.events
    assert tool_trace(events) == [
        ("call", "read-1", "read_file"),
        ("call", "grep-1", "grep"),
        ("result", "read-1", True),
        ("result", "grep-1", True),
        ("call", "edit-1", "edit_file"),
        ("result", "edit-1", True),
        ("call", "run-1", "shell"),
        ("result", "run-1", False),
        ("call", "edit-2", "edit_file"),
        ("result", "edit-2", True),
        ("call", "run-2", "shell"),
        ("result", "run-2", True),
    ]
    done = results(events)
    assert "return a - b" in done["read-1"].output
    assert done["grep-1"].output == "calc.py:2:    return a - b"
    failed = done["run-1"]
    assert failed.output == "" and failed.error.startswith("exit code 1\n")
    assert "FAIL: add(2, 3) returned 6, expected 5" in failed.error
    assert failed.display.exit_code == 1
    assert failed.display.summary == "$ python3 check.py (exit 1)"
    assert "OK: add works" in done["run-2"].output and done["run-2"].display.exit_code == 0
    assert "-    return a - b\n+    return a * b\n" in done["edit-1"].display.diff
    assert done["edit-2"].display.summary == "edit calc.py (+1 -1)"
    # Nothing asked (approvals "never"), and the answer closes the turn.
    assert asked(events) == []
    assert [e.assistant_message.text for e in events if e.HasField("assistant_message")] == [
        "add is fixed; check.py passes."
    ]

    # The model saw the failure, output included, in the very next request.
    after_failure = first_request_with(coding.requests, "run-1")
    assert result_sent(after_failure, "run-1") == ToolResultMessage("run-1", failed.error, False)
    # First in the request right after run-1's step (the one edit-2 answered), then kept.
    carried = [result_sent(request, "run-1") is not None for request in coding.requests]
    assert carried == [False, False, False, True, True, True]

    # The files changed exactly as the edits said.
    assert (coding.folder / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (coding.folder / "check.py").read_text() == CHECK
    assert set(entries(coding.folder)) - {"__pycache__"} == {"calc.py", "check.py"}
    # And a client opening the session later reads the same log.
    reader = await coding.client().open_session(session.id)
    assert tool_trace(reader.events) == tool_trace(events)


async def test_a_commands_output_streams_whole_and_in_order_before_its_result(
    coding: Coding,
) -> None:
    session = await coding.session(approvals="never")
    lines = "".join(f"line {n} of the build\n" for n in range(400))
    coding.script(
        tool(
            "shell", "run-1", command='for n in $(seq 0 399); do echo "line $n of the build"; done'
        )
    )
    updates = session.updates()
    seen: list[Update] = []
    try:
        await session.prompt("build it")
        async with asyncio.timeout(WAIT_S):
            async for update in updates:
                seen.append(update)
                if isinstance(update, EventAppended) and update.event.HasField("turn_end"):
                    break
    finally:
        updates.close()

    result_at = next(
        i
        for i, u in enumerate(seen)
        if isinstance(u, EventAppended) and u.event.HasField("tool_result")
    )
    streamed = [(i, u) for i, u in enumerate(seen) if isinstance(u, OutputStreamed)]
    # Every piece came before the logged result, and together they are the output.
    assert streamed and all(i < result_at for i, _ in streamed)
    assert "".join(u.delta for _, u in streamed) == lines
    assert results(session.events)["run-1"].output == f"exit code 0\n{lines}"


# -- 2. paths stay inside the session folder ---------------------------------------------------


def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below a folder (symlinks not followed) and its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


async def test_path_escapes_are_refused_with_a_clear_error_and_nothing_outside_is_touched(
    coding: Coding, tmp_path: Path
) -> None:
    secret = coding.outside / "secret.txt"
    secret.write_text("top secret\n")
    (coding.folder / "link-dir").symlink_to(coding.outside, target_is_directory=True)
    (coding.folder / "link-file").symlink_to(secret)
    # A dangling link: writing through it would create a file outside.
    (coding.folder / "dangling").symlink_to(coding.outside / "planted.txt")
    (coding.folder / "inside.py").write_text("secret = None\n")
    (coding.folder / "loop").symlink_to("loop")
    outside_before, around_before = snapshot(coding.outside), entries(tmp_path)
    session = await coding.session(approvals="never")
    coding.script(
        tool("read_file", "read-up", path="../outside/secret.txt"),
        tool("read_file", "read-abs", path=str(secret)),
        tool("read_file", "read-link-file", path="link-file"),
        tool("read_file", "read-link-dir", path="link-dir/secret.txt"),
        tool("write_file", "write-up", path="../x", content="escaped"),
        tool("write_file", "write-abs", path=str(coding.outside / "new.txt"), content="escaped"),
        tool("write_file", "write-link-dir", path="link-dir/new.txt", content="escaped"),
        tool("write_file", "write-link-file", path="link-file", content="overwritten"),
        tool("edit_file", "edit-link-file", path="link-file", old_string="top", new_string="no"),
        tool(
            "edit_file", "edit-up", path="../outside/secret.txt", old_string="top", new_string="no"
        ),
        tool("list_dir", "list-up", path=".."),
        tool("grep", "grep-link-dir", pattern="secret", path="link-dir"),
        tool("glob", "glob-up", pattern="../outside/*"),
        tool("write_file", "write-dangling", path="dangling", content="planted"),
        tool("edit_file", "edit-abs", path=str(secret), old_string="top", new_string="no"),
        # Walking the folder skips what links lead outside to.
        tool("grep", "grep-all", pattern="secret"),
        tool("glob", "glob-all", pattern="**"),
        tool("write_file", "write-loop", path="loop", content="x"),
        tool("write_file", "write-inside", path="inside.txt", content="fine\n"),
    )
    await session.prompt("try to get out")
    await finished(session)

    done = results(session.events)
    root = coding.folder.resolve()
    lexical = {
        "read-up": "../outside/secret.txt",
        "read-abs": str(secret),
        "write-up": "../x",
        "write-abs": str(coding.outside / "new.txt"),
        "edit-abs": str(secret),
        "edit-up": "../outside/secret.txt",
        "list-up": "..",
    }
    for call_id, path in lexical.items():
        result = done[call_id]
        assert not result.ok and result.output == "", call_id
        assert result.error == f"path {path!r} is outside the session folder {root}", call_id
    through_links = {
        "read-link-file": "link-file",
        "read-link-dir": "link-dir/secret.txt",
        "write-link-dir": "link-dir/new.txt",
        "write-link-file": "link-file",
        "edit-link-file": "link-file",
        "grep-link-dir": "link-dir",
        "write-dangling": "dangling",
    }
    for call_id, path in through_links.items():
        result = done[call_id]
        assert not result.ok and result.output == "", call_id
        assert result.error == (
            f"path {path!r} leads outside the session folder {root} through a symlink"
        ), call_id
    assert not done["glob-up"].ok and "would leave the search folder" in done["glob-up"].error
    assert done["write-loop"].error == "path 'loop' runs into a symlink loop"
    assert done["grep-all"].ok and done["grep-all"].output == "inside.py:1:secret = None"
    assert done["glob-all"].ok and done["glob-all"].output == "inside.py"
    # No refusal leaked what is outside.
    assert all("top secret" not in r.error + r.output for r in done.values())
    # The last call shows the tools work; everything else left the disk as it was.
    assert done["write-inside"].ok and (coding.folder / "inside.txt").read_text() == "fine\n"
    assert snapshot(coding.outside) == outside_before
    assert entries(tmp_path) == around_before
    assert (coding.folder / "link-file").is_symlink() and secret.read_text() == "top secret\n"
    assert asked(session.events) == []


# -- 3. the sandbox --------------------------------------------------------------------------


async def test_a_read_only_sandbox_refuses_changes_without_asking(
    coding: Coding,
) -> None:
    (coding.folder / "calc.py").write_text(CALC)
    before = snapshot(coding.folder)
    # The approval policy stays "ask": the sandbox refuses before anyone is asked.
    session = await coding.session(sandbox="read-only")
    assert session.settings is not None and session.settings.approvals == "ask"
    coding.script(
        tool("read_file", "read", path="calc.py"),
        tool("list_dir", "list", path="."),
        tool("grep", "grep", pattern="return"),
        tool("glob", "glob", pattern="*.py"),
        tool("write_file", "write", path="new.py", content="x = 1\n"),
        tool("edit_file", "edit", path="calc.py", old_string="a - b", new_string="a + b"),
    )
    await session.prompt("look around, then change things")
    await finished(session)

    done = results(session.events)
    assert [(call_id, done[call_id].ok) for call_id in done] == [
        ("read", True),
        ("list", True),
        ("grep", True),
        ("glob", True),
        ("write", False),
        ("edit", False),
    ]
    assert "return a - b" in done["read"].output and done["glob"].output == "calc.py"
    refused = "Not run: the sandbox is read-only: {} are refused (the user can change it with "
    assert done["write"].error == refused.format("file changes") + "/sandbox workspace-write)."
    assert done["edit"].error == refused.format("file changes") + "/sandbox workspace-write)."
    # Nobody was asked, and nothing changed.
    assert asked(session.events) == [] and session.questions == {}
    assert snapshot(coding.folder) == before


async def test_a_full_sandbox_reads_outside_the_session_folder(coding: Coding) -> None:
    secret = coding.outside / "secret.txt"
    secret.write_text("top secret\n")
    (coding.folder / "link-file").symlink_to(secret)
    session = await coding.session(sandbox="full")
    coding.script(
        tool("read_file", "read-abs", path=str(secret)),
        tool("read_file", "read-up", path="../outside/secret.txt"),
        tool("read_file", "read-link", path="link-file"),
    )
    await session.prompt("read the secret")
    await finished(session)
    done = results(session.events)
    for call_id in ("read-abs", "read-up", "read-link"):
        assert done[call_id].ok, done[call_id].error
        assert done[call_id].output == "     1\ttop secret", call_id
    assert asked(session.events) == []


# -- 4. the approval policy -------------------------------------------------------------------


async def test_ask_allow_once_then_for_the_session_then_deny_with_a_reason(
    coding: Coding,
) -> None:
    notes = coding.folder / "notes.txt"
    session = await coding.session()
    assert session.settings == Settings("workspace-write", "ask")  # the defaults
    coding.script(
        tool("write_file", "w-1", path="notes.txt", content="one\n"),
        tool("write_file", "w-2", path="notes.txt", content="one\ntwo\n"),
        tool("edit_file", "e-1", path="notes.txt", old_string="two", new_string="three"),
        tool("write_file", "w-3", path="sub/more.txt", content="more\n"),
        tool("shell", "s-1", command="rm notes.txt"),
        final="I kept the notes.",
    )
    await session.prompt("take notes")

    first = await question_for(session, "w-1")
    assert first.presentation == "tool-approval"
    # A new file's approval shows it as the diff that creates it.
    created = "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+one\n"
    assert first.title == "Allow write notes.txt?" and first.body == created
    assert first.approval == Approval("write_file", "write notes.txt", created, "edit")
    assert first.turn_id and not notes.exists()  # nothing runs before the answer
    await session.answer_question(first.question_id, allow_once=True)

    # Allowed once: the next file change asks again.
    second = await question_for(session, "w-2")
    assert notes.read_text() == "one\n"
    # Over an existing file: the diff against it, with its context.
    grown = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1,2 @@\n one\n+two\n"
    assert second.approval == Approval("write_file", "write notes.txt", grown, "edit")
    await session.answer_question(second.question_id, allow_for_session=True)

    # Allowed for the session: file changes run unasked, a command still asks.
    third = await question_for(session, "s-1")
    assert notes.read_text() == "one\nthree\n"
    assert (coding.folder / "sub" / "more.txt").read_text() == "more\n"
    assert third.title == "Allow $ rm notes.txt?"
    assert third.approval == Approval(
        "shell", "$ rm notes.txt", "rm notes.txt", "shell:rm notes.txt"
    )
    await session.answer_question(third.question_id, deny="keep the notes")
    await finished(session)

    events = session.events
    assert [q.call_id for q in asked(events)] == ["w-1", "w-2", "s-1"]
    assert [a.answer.WhichOneof("kind") for a in answered(events)] == [
        "allow_once",
        "allow_for_session",
        "deny",
    ]
    done = results(events)
    assert [(c, done[c].ok) for c in done] == [
        ("w-1", True),
        ("w-2", True),
        ("e-1", True),
        ("w-3", True),
        ("s-1", False),
    ]
    assert done["s-1"].error == "The user denied this call: keep the notes"
    assert notes.read_text() == "one\nthree\n"  # not removed
    # The model is told why.
    sent = result_sent(first_request_with(coding.requests, "s-1"), "s-1")
    assert sent == ToolResultMessage("s-1", "The user denied this call: keep the notes", False)
    assert session.questions == {}


async def test_ask_for_commands_runs_writes_and_grants_one_exact_command(coding: Coding) -> None:
    runs = coding.folder / "runs.txt"
    session = await coding.session(approvals="ask-for-commands")
    coding.script(
        tool("write_file", "w-1", path="a.txt", content="a\n"),
        tool("shell", "s-1", command="echo hi >> runs.txt"),
        tool("shell", "s-2", command="echo hi >> runs.txt"),
        tool("shell", "s-3", command="echo bye >> runs.txt"),
    )
    await session.prompt("write, then run things")

    first = await question_for(session, "s-1")
    assert (coding.folder / "a.txt").read_text() == "a\n"  # the write did not ask
    assert first.approval == Approval(
        "shell", "$ echo hi >> runs.txt", "echo hi >> runs.txt", "shell:echo hi >> runs.txt"
    )
    assert not runs.exists()
    await session.answer_question(first.question_id, allow_for_session=True)

    # The same command runs again unasked; another one asks.
    other = await question_for(session, "s-3")
    assert runs.read_text() == "hi\nhi\n"
    assert other.approval is not None and other.approval.grant == "shell:echo bye >> runs.txt"
    await session.answer_question(other.question_id, allow_once=True)
    await finished(session)

    assert [q.call_id for q in asked(session.events)] == ["s-1", "s-3"]
    assert all(r.ok for r in results(session.events).values())
    assert runs.read_text() == "hi\nhi\nbye\n"


async def test_a_sandbox_narrowed_while_a_question_waits_refuses_the_allowed_call(
    coding: Coding,
) -> None:
    session = await coding.session()
    coding.script(tool("write_file", "w-1", path="late.txt", content="late\n"))
    await session.prompt("write late.txt")
    question = await question_for(session, "w-1")
    await session.set_settings(sandbox="read-only")
    await session.answer_question(question.question_id, allow_once=True)
    await finished(session)
    assert "sandbox is read-only" in results(session.events)["w-1"].error
    assert not (coding.folder / "late.txt").exists()


# -- 5. an approval question across reconnects and clients -----------------------------------------


async def test_an_approval_survives_a_reconnect_and_is_answered_exactly_once(
    coding: Coding,
) -> None:
    runs = coding.folder / "runs.txt"
    first_client = coding.client()
    session = await coding.session(client=first_client)
    coding.script(tool("shell", "s-1", command="echo ran >> runs.txt"))
    await session.prompt("record a run")
    question = await question_for(session, "s-1")

    generation, loads = first_client.generation, session.loads
    assert await first_client.reconnect() > generation
    await session.wait_until(lambda s: s.loads > loads, WAIT_S)  # refreshed after the reconnect
    assert session.questions == {question.question_id: question}
    # A client that was not there when it was asked gets it from the projection.
    other = await coding.client().open_session(session.id)
    assert other.questions == {question.question_id: question}
    assert not runs.exists()
    # An answer of the wrong kind is refused, typed, and leaves it open.
    with pytest.raises(InvalidArgumentError) as wrong:
        await other.answer_question(question.question_id, approve=True)
    assert wrong.value.reason == "ANSWER_MISMATCH"

    outcomes = await asyncio.gather(
        session.answer_question(question.question_id, allow_once=True),
        other.answer_question(question.question_id, allow_once=True),
        return_exceptions=True,
    )
    won = [o for o in outcomes if isinstance(o, int)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert isinstance(lost[0], FailedPreconditionError), lost[0]
    assert lost[0].reason == "QUESTION_ANSWERED"
    await finished(session)
    await finished(other)

    # The tool ran once; one answer is in the log; both clients see it closed.
    assert runs.read_text() == "ran\n"
    for seen in (session, other):
        assert len(answered(seen.events)) == 1 and seen.questions == {}
        assert [r.ok for r in results(seen.events).values()] == [True]
    # A late answer gets the same typed error.
    with pytest.raises(FailedPreconditionError) as late:
        await other.answer_question(question.question_id, deny="too late")
    assert late.value.reason == "QUESTION_ANSWERED"


async def test_stopping_a_turn_that_waits_for_approval_closes_the_question_unrun(
    coding: Coding,
) -> None:
    session = await coding.session()
    coding.script(tool("shell", "s-1", command="touch ran.txt"))
    await session.prompt("run it")
    question = await question_for(session, "s-1")
    assert await session.cancel()
    await finished(session)
    await session.wait_until(lambda s: s.questions == {}, WAIT_S)
    assert [t.reason for t in turn_ends(session.events)] == [ev.TURN_END_REASON_CANCELLED]
    with pytest.raises(NotFoundError) as late:
        await session.answer_question(question.question_id, allow_once=True)
    assert late.value.reason == "QUESTION_NOT_FOUND"
    assert not (coding.folder / "ran.txt").exists()


async def test_an_approval_survives_a_runtime_restart_and_its_call_runs_once(
    coding: Coding,
) -> None:
    runs = coding.folder / "runs.txt"
    session = await coding.session()
    coding.script(tool("shell", "s-1", command="echo ran >> runs.txt"), final="Recorded.")
    await session.prompt("record a run")
    question = await question_for(session, "s-1")
    await coding.harness.stack.restart("agentruntime")

    # Still open, in the log's projection, before anything loaded the agent again.
    views = await coding.projection(session.id, "questions")
    assert isinstance(views, list) and len(views) == 1 and isinstance(views[0], dict)
    assert views[0]["question_id"] == question.question_id and views[0]["call_id"] == "s-1"
    # The answer itself loads the agent, and the waiting turn goes on.
    await session.answer_question(question.question_id, allow_once=True)
    await finished(session)
    reader = await coding.client().open_session(session.id)
    assert reader.questions == {} and tool_trace(reader.events) == tool_trace(session.events)
    assert runs.read_text() == "ran\n"
    assert [r.ok for r in results(session.events).values()] == [True]
    assert [t.reason for t in turn_ends(session.events)] == [ev.TURN_END_REASON_COMPLETED]
    assert assistant_texts(session.events) == ["Recorded."]


async def test_after_a_runtime_died_mid_turn_a_plan_choice_commits_at_once(
    coding: Coding,
) -> None:
    session = await coding.session()
    held = coding.harness.model.enqueue(ScriptedReply(text="Thinking for ever", hold=True))
    await session.prompt("think")
    await asyncio.wait_for(held.started.wait(), WAIT_S)
    await coding.harness.stack.restart("agentruntime")
    # The log still shows the turn open; the choice loads the session, which
    # closes that turn, so the idle session commits instead of queueing.
    reply = await session.set_plan(True)
    assert reply.outcome == "committed"
    await session.wait_until(lambda s: s.plan.state == PlanState(active=True), WAIT_S)
    assert [t.reason for t in turn_ends(session.events)] == [ev.TURN_END_REASON_INTERRUPTED]
    assert not session.running


# -- 6. plan mode steers; it changes neither the tools nor the gates ---------------------------

PLAN = "# Plan\n\n1. Greet the world instead of saying hello."


async def test_plan_mode_offers_the_same_tools_and_an_approved_plan_edits_in_the_same_turn(
    coding: Coding,
) -> None:
    app = coding.folder / "app.py"
    app.write_text("print('hello')\n")
    session = await coding.session(approvals="never")
    coding.script(final="Hello.")
    await session.prompt("hi")
    await finished(session)

    await session.set_plan(True)
    await session.wait_until(lambda s: s.plan.state == PlanState(True), WAIT_S)
    coding.script(
        tool("exit_plan_mode", "plan-1", plan=PLAN),
        tool("edit_file", "edit-1", path="app.py", old_string="hello", new_string="hello, world"),
        final="Implemented.",
    )
    await session.prompt("plan it, then do it")
    review = await question_for(session, "plan-1")
    assert review.presentation == "plan-review" and review.approve_label == "Approve"
    assert review.body == PLAN and review.approval is None
    assert app.read_text() == "print('hello')\n"
    await session.answer_question(review.question_id, approve=True)
    await finished(session, turns=2)

    events = session.events
    logged = headers(events)
    assert [h.step for h in logged] == [0, 0, 1, 2]
    # Byte-identical tool lists, in the log and as the model received them.
    tools = [[t.SerializeToString(deterministic=True) for t in h.tools] for h in logged]
    assert all(listed == tools[0] for listed in tools)
    # Plan mode hides nothing: the editing tools stay listed while it is on.
    offered = {t.name for t in logged[1].tools}
    assert {"edit_file", "write_file", "shell", "exit_plan_mode"} <= offered
    sent = [[t.SerializeToString(deterministic=True) for t in r.tools] for r in coding.requests]
    assert sent == tools
    # Only the prompt (its sections) tells the model about plan mode.
    assert [shows_plan_policy(h) for h in logged] == [False, True, False, False]

    # The plan was approved, plan mode left, and the same turn's next step edited.
    second_turn = logged[1].turn_id
    assert {h.turn_id for h in logged[1:]} == {second_turn} and logged[0].turn_id != second_turn
    done = results(events)
    assert done["plan-1"].ok and done["plan-1"].output == '{"approved": true}'
    assert done["edit-1"].ok and app.read_text() == "print('hello, world')\n"
    assert [e.plan_mode.active for e in events if e.HasField("plan_mode")] == [True, False]
    assert session.plan.state == PlanState(False)
    assert assistant_texts(events) == ["Hello.", "Implemented."]
    assert [q.presentation for q in asked(events)] == [ev.QUESTION_PRESENTATION_PLAN_REVIEW]


# -- 7. settings are log events --------------------------------------------------------------------


def _settings_events(session: Session) -> list[ev.SessionSettings]:
    return [e.session_settings for e in session.events if e.HasField("session_settings")]


async def test_settings_are_log_events_kept_by_a_fork_and_a_runtime_restart(
    coding: Coding,
) -> None:
    session = await coding.session()
    wanted = Settings("read-only", "never")
    # The reply shows them at once; the log's event reaches the session's
    # stream on its own time.
    assert await session.set_settings(sandbox="read-only", approvals="never") == wanted
    assert session.settings == wanted
    await session.wait_until(lambda s: bool(_settings_events(s)), WAIT_S)
    assert _settings_events(session) == [
        ev.SessionSettings(
            sandbox=ev.SANDBOX_READ_ONLY,
            approvals=ev.APPROVAL_POLICY_NEVER,
            origin=ev.SETTINGS_ORIGIN_SESSION,
        )
    ]
    # Setting what is already set records nothing.
    assert await session.set_settings(sandbox="read-only") == wanted

    # A fork of the log has them: in its projection and in its gates.
    fork = await coding.log.fork(session.id)
    assert fork.cwd == str(coding.folder)
    assert await coding.projection(fork.id, "settings") == {
        "sandbox": "read-only",
        "approvals": "never",
        "model": "",
        "network": False,
        "origin": "session",
        "sources": [],
        "problems": [],
    }
    coding.script(tool("write_file", "fork-w", path="fork.txt", content="x"))
    await coding.runtime.Prompt(rt.PromptRequest(session_id=fork.id, text="write in the fork"))
    forked = await coding.log_until(fork.id, lambda log: len(turn_ends(log)) >= 1)
    assert "sandbox is read-only" in results(forked)["fork-w"].error
    assert asked(forked) == [] and not (coding.folder / "fork.txt").exists()

    # A restarted runtime refolds them from the log.
    await coding.harness.stack.restart("agentruntime")
    reader = await coding.client().open_session(session.id)
    assert reader.settings == wanted
    coding.script(tool("write_file", "w-1", path="a.txt", content="a"))
    await reader.prompt("write a")
    await finished(reader)
    assert "sandbox is read-only" in results(reader.events)["w-1"].error
    assert not (coding.folder / "a.txt").exists()
    # Only the sandbox changes: the policy "never" is still the log's.
    assert await reader.set_settings(sandbox="workspace-write") == Settings(
        "workspace-write", "never"
    )
    coding.script(tool("write_file", "w-2", path="a.txt", content="a"))
    await reader.prompt("write a again")
    await finished(reader, turns=2)
    assert results(reader.events)["w-2"].ok and (coding.folder / "a.txt").read_text() == "a"
    assert asked(reader.events) == []
    # And the fork was not touched by any of it.
    assert await coding.projection(fork.id, "settings") == {
        "sandbox": "read-only",
        "approvals": "never",
        "model": "",
        "network": False,
        "origin": "session",
        "sources": [],
        "problems": [],
    }
