"""Small constructors for session events used across the suites."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from agenthost.sessionlog.v1 import events_pb2 as ev

Event = ev.Event


def user(text: str, event_id: str = "") -> Event:
    return Event(
        id=event_id,
        user_message=ev.UserMessage(text=text, source=ev.MessageSource(kind=ev.SOURCE_KIND_USER)),
    )


def assistant(text: str, event_id: str = "") -> Event:
    return Event(id=event_id, assistant_message=ev.AssistantMessage(text=text))


def tool_call(call_id: str, name: str = "read_file", args_json: str = "{}") -> Event:
    return Event(tool_call=ev.ToolCall(call_id=call_id, name=name, args_json=args_json))


def tool_result(call_id: str, output: str = "ok") -> Event:
    return Event(tool_result=ev.ToolResult(call_id=call_id, ok=True, output=output))


def plan_mode(active: bool) -> Event:
    return Event(plan_mode=ev.PlanMode(active=active))


def turn_start(turn_id: str = "t") -> Event:
    return Event(turn_start=ev.TurnStart(turn_id=turn_id))


def turn_end(turn_id: str = "t") -> Event:
    return Event(turn_end=ev.TurnEnd(turn_id=turn_id, reason=ev.TURN_END_REASON_COMPLETED))


def title(text: str) -> Event:
    return Event(session_title=ev.SessionTitle(title=text))


def kinds(events: list[Event]) -> list[str]:
    return [e.WhichOneof("body") or "" for e in events]


def a_working_session() -> Iterator[ev.Event]:
    """Turns with steps, tool calls, questions, settings and plan mode, forever."""
    for n in itertools.count():
        turn = f"t{n}"
        yield ev.Event(turn_start=ev.TurnStart(turn_id=turn))
        yield user(f"task {n}")
        yield ev.Event(step_start=ev.StepStart(turn_id=turn, step=0))
        yield tool_call(f"c{n}")
        yield ev.Event(
            question_asked=ev.QuestionAsked(
                question_id=f"q{n}",
                call_id=f"c{n}",
                presentation=ev.QUESTION_PRESENTATION_TOOL_APPROVAL,
                approval=ev.ToolApproval(grant=f"shell:cmd{n % 5}"),
            )
        )
        yield ev.Event(
            question_answered=ev.QuestionAnswered(
                question_id=f"q{n}", answer=ev.QuestionAnswer(allow_for_session=True)
            )
        )
        yield tool_result(f"c{n}")
        yield ev.Event(step_end=ev.StepEnd(turn_id=turn, step=0))
        yield assistant(f"done {n}")
        yield plan_mode(n % 3 == 0)
        yield title(f"title {n}")
        yield ev.Event(turn_end=ev.TurnEnd(turn_id=turn, reason=ev.TURN_END_REASON_COMPLETED))
