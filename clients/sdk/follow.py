"""Following a subagent at work: the tool calls of a child session's
current turn (or, when it has not started yet, of its next), as they come,
ending with that turn. The CLI nests them under the task call; ACP shows
them as the task call's progress."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence

from agenthost.sessionlog.v1 import events_pb2

from .session import EventAppended, Session


async def turn_calls(
    child: Session, expected: Callable[[], bool]
) -> AsyncIterator[events_pb2.ToolCall]:
    """The calls of `child`'s turn under way, from its start, then live until
    it ends. A child opened between turns is followed into its next turn
    while `expected()` (its parent still lists it as running) says one will
    come; a child opened before its first turn is such a child."""
    updates = child.updates()
    try:
        turn = current_turn(child.events)
        if turn and not any(event.HasField("turn_end") for event in turn):
            for event in turn:
                if event.HasField("tool_call"):
                    yield event.tool_call
        elif not expected():
            return
        async for update in updates:
            if not isinstance(update, EventAppended):
                continue
            if update.event.HasField("tool_call"):
                yield update.event.tool_call
            elif update.event.HasField("turn_end"):
                return
    finally:
        updates.close()


def current_turn(events: Sequence[events_pb2.Event]) -> list[events_pb2.Event]:
    """The events since the last turn/start ([] before the first)."""
    starts = [i for i, event in enumerate(events) if event.HasField("turn_start")]
    return list(events[starts[-1] :]) if starts else []
