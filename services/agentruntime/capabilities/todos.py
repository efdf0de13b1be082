"""The task list the agent keeps while it works (Claude Code's TodoWrite,
Codex's update_plan, ACP's plan), so the person watching sees what it is
doing and what is left.

The model writes it with the `todo_write` tool: the whole list each call,
each item's `content` and `status` (pending, in_progress, completed). A list
with an empty or a repeated item is refused with a tool error (the model
tries again); an empty list clears it. What the model wrote is recorded as
todos/updated right after the call's result, and folded into the `todos`
projection clients show (TODOS_UNIT). A compaction keeps it: the part gives
the list as it stands as context the compaction carries, so the model sees
it again after the cut, and a view that starts there knows it
(ContextAdded.todos). A restart rebuilds both from the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev

from services.projection.unit import FoldUnit

from ..capability import Capability, SessionPart, SessionScope
from ..tools import Args, Tool, ToolContext, ToolDisplay, ToolOutcome

NAME = "todos"
TOOL_NAME = "todo_write"
MAX_ITEMS = 100
MAX_CONTENT_CHARS = 1000
STATUSES: dict[str, ev.TodoStatus.ValueType] = {
    "pending": ev.TODO_STATUS_PENDING,
    "in_progress": ev.TODO_STATUS_IN_PROGRESS,
    "completed": ev.TODO_STATUS_COMPLETED,
}
STATUS_NAMES = {value: name for name, value in STATUSES.items()}
# How the model reads a list (after a compaction, in todo_write's result).
MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}
CARRIED_HEADING = (
    "Your task list (todo_write) as it stood when the conversation was compacted; "
    "keep it up to date:"
)

DESCRIPTION = (
    "Write your task list for the work at hand, so the user sees what you are doing and "
    "what is left. Use it for work of three steps or more, not for a single small task. "
    "Send the whole list each time: it replaces the last one (an empty list clears it). "
    "Each item has `content` (what to do, one line) and `status`: `pending`, `in_progress` "
    "(the one you work on now: one at a time) or `completed` (mark it as soon as it is "
    "done). Items must not be empty or repeat one another."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "todos": {
            "type": "array",
            "description": "The whole task list, in order.",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "minLength": 1},
                    "status": {"type": "string", "enum": list(STATUSES)},
                },
                "required": ["content", "status"],
            },
        }
    },
    "required": ["todos"],
}


class BadList(ValueError):
    """Why a list written to todo_write is refused (the model is told)."""


def parsed_items(args: Args) -> list[ev.TodoItem]:
    """The list todo_write was given, or BadList saying what is wrong."""
    todos = args.get("todos")
    if not isinstance(todos, list):
        raise BadList("todos must be a list of {content, status} items")
    if len(todos) > MAX_ITEMS:
        raise BadList(f"a task list has at most {MAX_ITEMS} items")
    items: list[ev.TodoItem] = []
    seen: dict[str, int] = {}
    for number, item in enumerate(todos, 1):
        if not isinstance(item, dict):
            raise BadList(f"item {number} is not an object with content and status")
        content, status = item.get("content"), item.get("status")
        if not isinstance(content, str) or not content.strip():
            raise BadList(f"item {number} is empty: give it a content")
        content = " ".join(content.split())
        if len(content) > MAX_CONTENT_CHARS:
            raise BadList(f"item {number} is longer than {MAX_CONTENT_CHARS} characters")
        if status not in STATUSES:
            raise BadList(f"item {number}: status must be one of {', '.join(STATUSES)}")
        key = content.casefold()
        if key in seen:
            raise BadList(f"item {number} repeats item {seen[key]} ({content!r})")
        seen[key] = number
        items.append(ev.TodoItem(content=content, status=STATUSES[status]))
    return items


def checklist(items: Sequence[ev.TodoItem]) -> str:
    return "\n".join(f"{MARKS[STATUS_NAMES[i.status]]} {i.content}" for i in items)


def progress(items: Sequence[ev.TodoItem]) -> str:
    """ "2/5 done" (or "cleared")."""
    done = sum(i.status == ev.TODO_STATUS_COMPLETED for i in items)
    return f"{done}/{len(items)} done" if items else "cleared"


async def todo_write(context: ToolContext, args: Args) -> ToolOutcome:
    try:
        items = parsed_items(args)
    except BadList as bad:
        return ToolOutcome(ok=False, error=f"The task list was not changed: {bad}.")
    written = ev.TodosUpdated(call_id=context.call_id, items=items)
    said = f"Task list updated ({progress(items)})."
    return ToolOutcome(
        ok=True,
        output=f"{said}\n{checklist(items)}" if items else "Task list cleared.",
        display=ToolDisplay(summary=f"todos: {progress(items)}"),
        events=(ev.Event(todos_updated=written),),
    )


TODO_WRITE = Tool(TOOL_NAME, DESCRIPTION, PARAMETERS, todo_write)


# -- the session's part --------------------------------------------------------------------------


class TodosPart(SessionPart):
    """The list as the model's view last showed it."""

    def __init__(self) -> None:
        self.items: list[ev.TodoItem] = []

    def observe(self, event: ev.Event) -> None:
        kind = event.WhichOneof("body")
        if kind == "todos_updated":
            self.items = list(event.todos_updated.items)
        elif kind == "compaction":
            carried = [c for c in event.compaction.context if c.capability == NAME]
            self.items = list(carried[-1].todos) if carried else []

    def carried(self) -> list[ev.ContextAdded]:
        if not self.items:
            return []
        text = f"{CARRIED_HEADING}\n{checklist(self.items)}"
        return [ev.ContextAdded(capability=NAME, text=text, todos=self.items)]


class Todos(Capability):
    name = NAME

    def tools(self) -> Sequence[Tool]:
        return (TODO_WRITE,)

    def session(self, scope: SessionScope) -> SessionPart:
        return TodosPart()


# -- the `todos` projection: the list as it stands ----------------------------------------------


@dataclass(frozen=True)
class Todo:
    content: str
    status: str


@dataclass(frozen=True)
class TodosFold:
    items: tuple[Todo, ...] = ()


def fold_todos(state: TodosFold, event: ev.Event) -> TodosFold:
    if not event.HasField("todos_updated"):
        return state
    items = tuple(Todo(i.content, STATUS_NAMES[i.status]) for i in event.todos_updated.items)
    return state if items == state.items else TodosFold(items)


def todos_view(state: TodosFold) -> dict[str, Any]:
    """The `todos` projection value: {items: [{content, status}]}."""
    return {"items": [{"content": t.content, "status": t.status} for t in state.items]}


def load_todos(data: dict[str, Any]) -> TodosFold:
    return TodosFold(tuple(Todo(str(t["content"]), str(t["status"])) for t in data["items"]))


TODOS_UNIT = FoldUnit(
    NAME, 1, TodosFold, fold_todos, todos_view, load_todos, frozenset({"todos_updated"})
)
