"""The model's view of a session as the transcript builds it from events."""

from __future__ import annotations

from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.models.base import (
    AssistantMessage,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from services.agentruntime.transcript import Transcript


def numbered(*events: ev.Event) -> list[ev.Event]:
    for seq, event in enumerate(events):
        event.seq = seq
    return list(events)


def test_context_recorded_while_calls_wait_follows_their_results() -> None:
    """A queued prompt's context lands between a call and its result in the
    log; the model reads it after the results, which a provider needs right
    after their call."""
    transcript = Transcript()
    transcript.add_all(
        numbered(
            ev.Event(user_message=ev.UserMessage(text="go")),
            ev.Event(tool_call=ev.ToolCall(call_id="c1", name="shell", args_json="{}")),
            ev.Event(tool_call=ev.ToolCall(call_id="c2", name="shell", args_json="{}")),
            ev.Event(context_added=ev.ContextAdded(capability="hooks", text="ctx")),
            ev.Event(tool_result=ev.ToolResult(call_id="c1", ok=True, output="one")),
            ev.Event(tool_result=ev.ToolResult(call_id="c2", ok=True, output="two")),
            ev.Event(context_added=ev.ContextAdded(capability="hooks", text="later")),
        )
    )
    calls = (
        ToolCallRequest("c1", "shell", "{}"),
        ToolCallRequest("c2", "shell", "{}"),
    )
    assert transcript.messages() == [
        UserMessage("go"),
        AssistantMessage("", calls),
        ToolResultMessage("c1", "one", True),
        ToolResultMessage("c2", "two", True),
        UserMessage("ctx"),
        UserMessage("later"),
    ]


def test_context_held_for_calls_a_turn_never_ran_follows_their_marks() -> None:
    transcript = Transcript()
    transcript.add_all(
        numbered(
            ev.Event(turn_start=ev.TurnStart(turn_id="t")),
            ev.Event(tool_call=ev.ToolCall(call_id="c1", name="shell", args_json="{}")),
            ev.Event(context_added=ev.ContextAdded(capability="hooks", text="ctx")),
            ev.Event(turn_end=ev.TurnEnd(turn_id="t", reason=ev.TURN_END_REASON_CANCELLED)),
        )
    )
    shown = transcript.messages()
    assert isinstance(shown[1], ToolResultMessage) and shown[1].call_id == "c1"
    assert shown[2] == UserMessage("ctx")


def test_context_of_a_turns_first_request_precedes_its_prompts() -> None:
    """Instructions loaded (or an undo told) as a turn's first request is
    built come before the prompts: the last message the model reads is the
    person's. Once the model has answered, context follows in order."""
    transcript = Transcript()
    transcript.add_all(
        numbered(
            ev.Event(turn_start=ev.TurnStart(turn_id="t1")),
            ev.Event(user_message=ev.UserMessage(text="fix it")),
            ev.Event(context_added=ev.ContextAdded(capability="instructions", text="rules")),
            ev.Event(assistant_message=ev.AssistantMessage(text="done")),
            ev.Event(context_added=ev.ContextAdded(capability="todos", text="list")),
            ev.Event(turn_end=ev.TurnEnd(turn_id="t1", reason=ev.TURN_END_REASON_COMPLETED)),
            ev.Event(turn_start=ev.TurnStart(turn_id="t2")),
            ev.Event(user_message=ev.UserMessage(text="again")),
            ev.Event(context_added=ev.ContextAdded(capability="checkpoints", text="undone")),
        )
    )
    assert transcript.messages() == [
        UserMessage("rules"),
        UserMessage("fix it"),
        AssistantMessage("done"),
        UserMessage("list"),
        UserMessage("undone"),
        UserMessage("again"),
    ]
