"""The agent's task list as the chat shows it: a compact checklist, printed
as the turn writes it and on `/todos`."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from clients.sdk import Todo

MARKS = {"completed": ("✓", "dim"), "in_progress": ("▸", "bold yellow"), "pending": ("○", "")}


def checklist(todos: Sequence[Todo]) -> Text:
    """`todos 1/3` then one line an item: ✓ done, ▸ in progress, ○ to do."""
    if not todos:
        return Text("todos: the task list is empty", style="dim")
    done = sum(todo.done for todo in todos)
    shown = Text()
    shown.append(f"todos {done}/{len(todos)}", style="bold")
    for todo in todos:
        mark, style = MARKS.get(todo.status, MARKS["pending"])
        shown.append("\n")
        shown.append(f"  {mark} {todo.content}", style=style)
    return shown
