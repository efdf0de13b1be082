"""File references and the task list in `agenthost chat`, driven in a real
terminal (a pty, through pexpect) against `agenthost up` in its own
process, its built-in model scripted: the task list shows as a checklist
while the turn runs and on /todos; Tab completes a path after `@`, and the
file reaches the model (the built-in model echoes what it was sent)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.test_cli import chat, expect_all, running_up

FIRST = [
    {"content": "Read the parser", "status": "in_progress"},
    {"content": "Fix the off-by-one", "status": "pending"},
]
SECOND = [
    {"content": "Read the parser", "status": "completed"},
    {"content": "Fix the off-by-one", "status": "in_progress"},
]
SCRIPT = {
    "replies": [
        {"tool_calls": [{"name": "todo_write", "args": {"todos": FIRST}}]},
        # Asks for approval: the turn waits with the first list on screen.
        {"tool_calls": [{"name": "shell", "args": {"command": "echo parsed"}}]},
        {"tool_calls": [{"name": "todo_write", "args": {"todos": SECOND}}]},
        {"text": "Fixing it now."},
        # Then it echoes what it is sent.
    ]
}


def test_the_task_list_shows_as_it_changes_and_an_at_path_completes(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("def answer():\n    return 41\n")
    (tmp_path / "notes.txt").write_text("not the project's")
    with running_up(tmp_path, SCRIPT) as up:
        child = chat(up, "--workspace", str(project))
        try:
            child.expect_exact("plan: off")
            child.expect_exact(">")
            child.sendline("fix the parser")
            child.expect_exact("todos 0/2")
            expect_all(child, "▸ Read the parser", "○ Fix the off-by-one")
            # Shown while the turn runs: it waits on the command's approval.
            child.expect_exact("allow>")
            child.sendline("y")
            child.expect_exact("todos 1/2")
            expect_all(child, "✓ Read the parser", "▸ Fix the off-by-one")
            child.expect_exact("Fixing it now.")

            child.expect_exact(">")
            child.sendline("/todos")
            child.expect_exact("todos 1/2")
            child.expect_exact("▸ Fix the off-by-one")

            # Tab completes the folder, then the file in it (the terminal
            # is sent what the completion added), and the file is attached.
            child.send("explain @sr\t")
            child.expect_exact("c/")
            child.send("ap\t")
            child.expect_exact("p.py")
            child.send("\r")
            expect_all(child, "Echo: explain @src/app.py", "return 41")

            # A path outside the project is refused, in one line; nothing is sent.
            child.expect_exact(">")
            child.sendline("summarise @../notes.txt")
            child.expect_exact("error: cannot attach @../notes.txt: path '../notes.txt' is outside")
        finally:
            child.sendline("/quit")
            child.close()
