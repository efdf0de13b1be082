"""Undo, redo, rewind, a turn's diff and subagents, as a user of the Python
SDK sees them: the whole stack on loopback (real runtime, real bubblewrap,
real shadow git repository), a real project folder, the scripted built-in
model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clients.sdk import FileChange, Session, Subagent
from services.agentruntime.models.builtin import ScriptedReply
from tests.support.coding import WAIT_S, Coding, coding_stack, finished, tool


@pytest.fixture
async def coding(tmp_path: Path) -> AsyncIterator[Coding]:
    async with coding_stack(tmp_path) as stack:
        (stack.folder / "a.py").write_text("def a():\n    return 1\n")
        (stack.folder / "notes.txt").write_text("colour: red\n")
        yield stack


async def two_turns(coding: Coding, session: Session) -> None:
    """Turn 1 edits a.py and seds notes.txt; turn 2 adds b.py."""
    coding.script(
        [
            tool("edit_file", "e1", path="a.py", old_string="return 1", new_string="return 10"),
            tool("shell", "s1", command="sed -i 's/red/blue/' notes.txt"),
        ]
    )
    await session.prompt("change a and the notes")
    await finished(session)
    coding.script(tool("write_file", "w1", path="b.py", content="B = 2\n"))
    await session.prompt("add b")
    await finished(session, 2)
    await session.wait_until(lambda s: len(s.checkpoints) == 2, WAIT_S)


async def test_the_turns_show_their_files_and_undo_redo_rewind_put_them_back(
    coding: Coding,
) -> None:
    folder = coding.folder
    session = await coding.session(approvals="never")
    await two_turns(coding, session)
    first, second = session.checkpoints
    assert (first.number, first.prompt, first.undone) == (1, "change a and the notes", False)
    assert set(first.files) == {
        FileChange("a.py", "modified", 1, 1),
        FileChange("notes.txt", "modified", 1, 1),
    }
    assert second.files == (FileChange("b.py", "added", 1, 0),)

    diff = await session.turn_diff(1)
    assert diff.ok and diff.turn == 1 and not diff.cut
    assert "-    return 1\n+    return 10" in diff.text and "+colour: blue" in diff.text
    assert not (await session.turn_diff(9)).ok

    undone = await session.undo()
    assert undone.ok and undone.restored == ("b.py",) and undone.skipped == ()
    assert not (folder / "b.py").exists()
    await session.wait_until(lambda s: s.checkpoints[1].undone, WAIT_S)
    redone = await session.redo(2)
    assert redone.ok and redone.restored == ("b.py",)
    assert (folder / "b.py").read_text() == "B = 2\n"

    # Turn 1 again, with a.py changed by the user since: asked first.
    (folder / "a.py").write_text("mine\n")
    checked = await session.undo(1, check=True)
    assert checked.checked and checked.restored == ("notes.txt",)
    assert checked.skipped == ("a.py",)
    assert (folder / "notes.txt").read_text() == "colour: blue\n"
    forced = await session.undo(1, force=True)
    assert set(forced.restored) == {"a.py", "notes.txt"} and forced.skipped == ()
    assert (folder / "a.py").read_text() == "def a():\n    return 1\n"
    assert (folder / "notes.txt").read_text() == "colour: red\n"

    rewound = await session.rewind(1, "conversation")
    assert rewound.ok, rewound.message
    await session.wait_until(lambda s: len(s.checkpoints) == 1, WAIT_S)
    with pytest.raises(ValueError):
        await session.rewind(1, "everything")


async def test_a_rewind_of_the_files_leaves_a_changed_file_until_forced(
    coding: Coding,
) -> None:
    folder = coding.folder
    session = await coding.session(approvals="never")
    await two_turns(coding, session)
    (folder / "notes.txt").write_text("the user's notes\n")
    checked = await session.rewind(0, "files", check=True)
    assert set(checked.restored) == {"a.py", "b.py"} and checked.skipped == ("notes.txt",)
    rewound = await session.rewind(0, "files", force=True)
    assert set(rewound.restored) == {"a.py", "b.py", "notes.txt"}, rewound.message
    assert (folder / "notes.txt").read_text() == "colour: red\n"
    assert not (folder / "b.py").exists()


async def test_subagents_show_with_their_usage_and_a_childs_approval_is_answered_here(
    coding: Coding,
) -> None:
    model = coding.harness.model
    client = coding.client()
    session = await coding.session(client=client, approvals="ask")
    # The parent's task call, the child's command (which asks) and its
    # answer, then the parent's closing text.
    model.enqueue(
        ScriptedReply(tool_calls=[tool("task", "t1", description="count files", prompt="count")])
    )
    model.enqueue(ScriptedReply(tool_calls=[tool("shell", "c1", command="ls | wc -l")]))
    model.enqueue(ScriptedReply(text="two files"))
    model.enqueue(ScriptedReply(text="The child counted two."))
    await session.prompt("delegate the count")
    await session.wait_until(
        lambda s: any(q.child_session_id for q in s.questions.values()), WAIT_S
    )
    (question,) = session.questions.values()
    await session.wait_until(lambda s: len(s.subagents) == 1, WAIT_S)
    (child,) = session.subagents
    assert question.child_session_id == child.session_id
    assert (child.agent_type, child.description, child.running) == ("general", "count files", True)
    await session.answer_question(question.question_id, allow_once=True)
    await finished(session)
    await session.wait_until(lambda s: not s.subagents[0].running, WAIT_S)
    (done,) = session.subagents
    assert isinstance(done, Subagent) and done.state == "done" and done.requests == 2
    assert done.prompt_tokens > 0
    (listed,) = await client.list_subagents(session.id)
    assert listed.id == child.session_id


async def test_a_subagents_changes_are_its_parent_turns_and_undo_takes_them_back(
    coding: Coding,
) -> None:
    model = coding.harness.model
    session = await coding.session(approvals="never")
    task = tool("task", "t1", description="write notes", prompt="Write the notes.")
    model.enqueue(ScriptedReply(tool_calls=[task]))
    write = tool("write_file", "w1", path="child.md", content="from the child\n")
    model.enqueue(ScriptedReply(tool_calls=[write]))
    model.enqueue(ScriptedReply(text="Wrote them."))
    model.enqueue(ScriptedReply(text="The subagent wrote the notes."))
    await session.prompt("have a subagent write notes")
    await finished(session)
    await session.wait_until(lambda s: len(s.checkpoints) == 1, WAIT_S)
    (turn,) = session.checkpoints
    assert turn.files == (FileChange("child.md", "added", 1, 0),)
    undone = await session.undo()
    assert undone.restored == ("child.md",) and not (coding.folder / "child.md").exists()


async def test_an_undo_that_left_every_file_alone_leaves_the_turn_to_undo_later(
    coding: Coding,
) -> None:
    folder = coding.folder
    session = await coding.session(approvals="never")
    await two_turns(coding, session)
    (folder / "b.py").write_text("the user's b\n")
    declined = await session.undo(2)
    assert declined.ok and declined.restored == () and declined.skipped == ("b.py",)
    assert (folder / "b.py").read_text() == "the user's b\n"
    assert not session.checkpoints[1].undone
    forced = await session.undo(2, force=True)
    assert forced.restored == ("b.py",) and not (folder / "b.py").exists()
    await session.wait_until(lambda s: s.checkpoints[1].undone, WAIT_S)
