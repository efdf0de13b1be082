"""The agent's task list, as the `todos` projection shows it."""

from __future__ import annotations

from dataclasses import dataclass

from agenthost.sessionlog.v1.events_pb2 import (
    TODO_STATUS_COMPLETED,
    TODO_STATUS_IN_PROGRESS,
    TODO_STATUS_PENDING,
    TodosUpdated,
)

from .projection import JsonValue

STATUSES = ("pending", "in_progress", "completed")
_STATUS_NAMES = {
    TODO_STATUS_PENDING: "pending",
    TODO_STATUS_IN_PROGRESS: "in_progress",
    TODO_STATUS_COMPLETED: "completed",
}


@dataclass(frozen=True)
class Todo:
    """One item of the agent's task list (its `todo_write`)."""

    content: str
    # "pending", "in_progress" or "completed".
    status: str

    @property
    def done(self) -> bool:
        """Whether the agent marked it completed."""
        return self.status == "completed"


def todos_value(view: JsonValue) -> list[Todo]:
    """The items of a `todos` projection value (malformed ones left out)."""
    items = view.get("items") if isinstance(view, dict) else None
    if not isinstance(items, list):
        return []
    return [
        Todo(str(item["content"]), str(item["status"]))
        for item in items
        if isinstance(item, dict)
        and isinstance(item.get("content"), str)
        and item.get("status") in STATUSES
    ]


def todos_written(updated: TodosUpdated) -> list[Todo]:
    """The list a todos/updated event wrote."""
    return [Todo(item.content, _STATUS_NAMES.get(item.status, "pending")) for item in updated.items]
