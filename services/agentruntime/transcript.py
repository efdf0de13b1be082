"""The conversation a model sees, rebuilt from the session's events.

From the latest compaction on, it is the compaction's summary and the
messages of the events after the seq the compaction covers (the log keeps
the rest; see compaction.py). A tool output above the spill limit shows as
its head and tail and a note naming its spill file (spill.py). A turn that
ended before its answer was complete leaves a marker the model sees next
time: its calls that never ran get a result saying so, and a cancelled
turn's partial answer (recorded as its assistant message) ends with a note
that the user cancelled, so the next prompt never follows the last one
with no answer between them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from agenthost.sessionlog.v1 import events_pb2

from . import spill
from .compaction import summary_message
from .models.base import (
    AssistantMessage,
    ChatMessage,
    Image,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)

CANCELLED_MARK = "[The user cancelled this turn here; the answer above is unfinished.]"
ENDED_EARLY_MARK = "[This turn ended before the answer was complete: {reason}]"
NOT_RUN = "Not run: the turn ended before this call ran."

_Entry = tuple[int, ChatMessage]


class Transcript:
    """Appended to as events are recorded; `messages()` is the model's view."""

    def __init__(self, spill_bytes: int = spill.MAX_SHOWN_BYTES) -> None:
        self._entries: list[_Entry] = []
        self._summary: str | None = None
        self._spill_bytes = spill_bytes
        # Calls of the last assistant message still waiting for a result.
        self._waiting: list[str] = []

    def add(self, event: events_pb2.Event) -> None:
        kind = event.WhichOneof("body")
        if kind == "user_message":
            self._append(event.seq, UserMessage(event.user_message.text))
        elif kind == "assistant_message":
            self._append(event.seq, AssistantMessage(event.assistant_message.text))
        elif kind == "tool_call":
            call = event.tool_call
            self._attach_call(event.seq, ToolCallRequest(call.call_id, call.name, call.args_json))
        elif kind == "tool_result":
            self._add_result(event.seq, event.tool_result)
        elif kind == "tool_attachment":
            self._attach_image(event.tool_attachment)
        elif kind == "turn_end":
            self._end_turn(event.seq, event.turn_end)
        elif kind == "compaction":
            self._summary = event.compaction.summary
            up_to = event.compaction.up_to_seq
            self._entries = [entry for entry in self._entries if entry[0] > up_to]

    def add_all(self, events: Iterable[events_pb2.Event]) -> None:
        for event in events:
            self.add(event)

    def messages(self) -> list[ChatMessage]:
        head = [summary_message(self._summary)] if self._summary is not None else []
        return [*head, *(message for _, message in self._entries)]

    def _append(self, seq: int, message: ChatMessage) -> None:
        self._entries.append((seq, message))

    def _add_result(self, seq: int, result: events_pb2.ToolResult) -> None:
        content = result.output if result.ok else result.error
        shown = spill.model_view(content, result.call_id, self._spill_bytes)
        self._append(seq, ToolResultMessage(result.call_id, shown, result.ok))
        if result.call_id in self._waiting:
            self._waiting.remove(result.call_id)

    def _attach_image(self, attachment: events_pb2.ToolAttachment) -> None:
        """Onto its call's result (recorded just before it)."""
        for index in range(len(self._entries) - 1, -1, -1):
            seq, message = self._entries[index]
            if isinstance(message, ToolResultMessage) and message.call_id == attachment.call_id:
                image = Image(attachment.mime_type, attachment.data)
                self._entries[index] = (seq, replace(message, images=(*message.images, image)))
                return

    def _attach_call(self, seq: int, call: ToolCallRequest) -> None:
        self._waiting.append(call.call_id)
        last = self._entries[-1] if self._entries else None
        if last is not None and isinstance(last[1], AssistantMessage):
            message = last[1]
            self._entries[-1] = (
                last[0],
                AssistantMessage(message.text, (*message.tool_calls, call)),
            )
        else:
            self._append(seq, AssistantMessage("", (call,)))

    def _end_turn(self, seq: int, end: events_pb2.TurnEnd) -> None:
        for call_id in self._waiting:
            self._append(seq, ToolResultMessage(call_id, NOT_RUN, ok=False))
        self._waiting = []
        if end.reason == events_pb2.TURN_END_REASON_CANCELLED:
            self._mark(seq, CANCELLED_MARK)
        elif end.reason != events_pb2.TURN_END_REASON_COMPLETED:
            self._mark(seq, ENDED_EARLY_MARK.format(reason=end.error or "no reason given"))

    def _mark(self, seq: int, mark: str) -> None:
        """The marker as (the end of) the turn's last assistant message."""
        last = self._entries[-1] if self._entries else None
        if last is not None and isinstance(last[1], AssistantMessage) and not last[1].tool_calls:
            text = f"{last[1].text}\n\n{mark}" if last[1].text else mark
            self._entries[-1] = (last[0], AssistantMessage(text))
        else:
            self._append(seq, AssistantMessage(mark))
