"""The conversation a model sees, rebuilt from the session's events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from agenthost.sessionlog.v1 import events_pb2

from .models.base import (
    AssistantMessage,
    ChatMessage,
    Image,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)


class Transcript:
    """Appended to as events are recorded; `messages()` is the model's view."""

    def __init__(self) -> None:
        self._messages: list[ChatMessage] = []

    def add(self, event: events_pb2.Event) -> None:
        kind = event.WhichOneof("body")
        if kind == "user_message":
            self._messages.append(UserMessage(event.user_message.text))
        elif kind == "assistant_message":
            self._messages.append(AssistantMessage(event.assistant_message.text))
        elif kind == "tool_call":
            self._attach_call(
                ToolCallRequest(
                    event.tool_call.call_id, event.tool_call.name, event.tool_call.args_json
                )
            )
        elif kind == "tool_result":
            result = event.tool_result
            self._messages.append(
                ToolResultMessage(
                    result.call_id, result.output if result.ok else result.error, result.ok
                )
            )
        elif kind == "tool_attachment":
            self._attach_image(event.tool_attachment)

    def _attach_image(self, attachment: events_pb2.ToolAttachment) -> None:
        """Onto its call's result (recorded just before it)."""
        for index in range(len(self._messages) - 1, -1, -1):
            message = self._messages[index]
            if isinstance(message, ToolResultMessage) and message.call_id == attachment.call_id:
                image = Image(attachment.mime_type, attachment.data)
                self._messages[index] = replace(message, images=(*message.images, image))
                return

    def add_all(self, events: Iterable[events_pb2.Event]) -> None:
        for event in events:
            self.add(event)

    def messages(self) -> list[ChatMessage]:
        return list(self._messages)

    def _attach_call(self, call: ToolCallRequest) -> None:
        last = self._messages[-1] if self._messages else None
        if isinstance(last, AssistantMessage):
            self._messages[-1] = AssistantMessage(last.text, (*last.tool_calls, call))
        else:
            self._messages.append(AssistantMessage("", (call,)))
