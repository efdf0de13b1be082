"""The way back and subagents in `agenthost chat`, driven in a real terminal
(a pty, through pexpect) against `agenthost up` in its own process, its
built-in model scripted: /diff shows a turn's changes, /undo puts its files
back (asking before it overwrites a file the user changed since), /rewind
picks a prompt and what to take back; a subagent's work shows nested under
its task call, its approval is asked here saying which subagent asks, and
/agents lists it with its usage."""

from __future__ import annotations

from pathlib import Path

from tests.integration.test_cli import chat, expect_all, running_up

CHANGES = {
    "replies": [
        {
            "tool_calls": [
                {
                    "name": "edit_file",
                    "args": {"path": "notes.txt", "old_string": "red", "new_string": "blue"},
                },
                {"name": "shell", "args": {"command": "rm old.txt"}},
            ]
        },
        {"text": "Changed the notes."},
        {"tool_calls": [{"name": "write_file", "args": {"path": "one.txt", "content": "1\n"}}]},
        {"text": "Wrote one."},
        {"tool_calls": [{"name": "write_file", "args": {"path": "two.txt", "content": "2\n"}}]},
        {"text": "Wrote two."},
    ]
}

DELEGATION = {
    "replies": [
        # The parent's task call; the subagent's command (it asks), its
        # answer; the parent's closing text.
        {
            "tool_calls": [
                {"name": "task", "args": {"description": "count files", "prompt": "Count."}}
            ]
        },
        {"tool_calls": [{"name": "shell", "args": {"command": "ls | wc -l"}}]},
        {"text": "There are two files."},
        {"text": "The subagent counted two files."},
    ]
}


def test_diff_undo_asks_before_overwriting_and_rewind_picks_a_prompt(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("colour: red\n")
    (project / "old.txt").write_bytes(b"old\x00bytes\n")
    with running_up(tmp_path, CHANGES) as up:
        child = chat(up, "--workspace", str(project))
        try:
            child.expect_exact("plan: off")
            child.expect_exact(">")
            child.sendline("/approvals never")
            child.expect_exact("approvals: never")
            child.sendline("change the notes")
            child.expect_exact("Changed the notes.")
            child.expect_exact(">")
            child.sendline("/diff")
            expect_all(child, "Turn 1 (change the notes): 2 file(s) changed", "+colour: blue")
            assert not (project / "old.txt").exists()

            # The user edits the notes after the turn: /undo asks first.
            (project / "notes.txt").write_text("colour: green\n")
            child.expect_exact(">")
            child.sendline("/undo")
            expect_all(child, "Changed since by someone other than the agent:", "  notes.txt")
            child.expect_exact("overwrite them? [y/N]>")
            child.sendline("n")
            child.expect_exact("Undid turn 1 (change the notes): 1 file(s) restored")
            assert (project / "old.txt").read_bytes() == b"old\x00bytes\n"
            assert (project / "notes.txt").read_text() == "colour: green\n"

            child.expect_exact(">")
            child.sendline("write one")
            child.expect_exact("Wrote one.")
            child.expect_exact(">")
            child.sendline("write two")
            child.expect_exact("Wrote two.")
            child.expect_exact(">")
            child.sendline("/rewind")
            child.expect_exact("Go back to before which prompt?")
            expect_all(
                child,
                "change the notes",
                "write one",
                "(1 file: one.txt)",
                "write two",
                "(1 file: two.txt)",
            )
            child.expect_exact("turn>")
            child.sendline("3")
            child.expect_exact("restore (c)ode, c(o)nversation or (b)oth? [b]>")
            # two.txt was changed since by the user: asked, then overwritten.
            (project / "two.txt").write_text("the user's two\n")
            child.sendline("c")
            expect_all(child, "Changed since by someone other than the agent:", "  two.txt")
            child.expect_exact("overwrite them? [y/N]>")
            child.sendline("y")
            child.expect_exact("Rewound to turn 2")
            assert not (project / "two.txt").exists()
            assert (project / "one.txt").read_text() == "1\n"
        finally:
            child.sendline("/quit")
            child.close()


def test_a_subagents_work_shows_nested_and_its_approval_is_answered_here(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a\n")
    (project / "b.txt").write_text("b\n")
    with running_up(tmp_path, DELEGATION) as up:
        child = chat(up, "--workspace", str(project))
        try:
            child.expect_exact("plan: off")
            child.expect_exact(">")
            child.sendline("count the files with a subagent")
            child.expect_exact("↳ general · count files: started")
            expect_all(
                child,
                "↳ count files: $ ls | wc -l",
                "subagent general · count files asks: Allow $ ls | wc -l?",
            )
            child.expect_exact("allow>")
            child.sendline("y")
            child.expect_exact("allowed once")
            expect_all(child, "↳ count files: done", "The subagent counted two files.")
            child.expect_exact(">")
            child.sendline("/agents")
            child.expect(r"general\s+count files\s+done\s+2 requests")
            child.expect_exact("agent types: general, explore")
        finally:
            child.sendline("/quit")
            child.close()
