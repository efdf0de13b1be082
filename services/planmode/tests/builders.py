"""Log events as the runtime and other writers record them, for tests."""

from __future__ import annotations

from collections.abc import Sequence

from agenthost.sessionlog.v1 import events_pb2

from agenthost_core.folds import PLAN_POLICY_SECTION_ID

Event = events_pb2.Event

BASE_SECTION = events_pb2.PromptSection(id="base", order=0, text="You are a coding agent.")


def turn_start(turn_id: str = "t1") -> Event:
    return Event(turn_start=events_pb2.TurnStart(turn_id=turn_id))


def turn_end(turn_id: str = "t1") -> Event:
    return Event(
        turn_end=events_pb2.TurnEnd(turn_id=turn_id, reason=events_pb2.TURN_END_REASON_COMPLETED)
    )


def request_header(sections: Sequence[events_pb2.PromptSection] = ()) -> Event:
    """What the model was sent: the base prompt plus the given sections."""
    header = events_pb2.RequestHeader(sections=[BASE_SECTION, *sections], model="builtin")
    return Event(request_header=header)


def plan_policy_header() -> Event:
    policy = events_pb2.PromptSection(id=PLAN_POLICY_SECTION_ID, order=50, text="plan")
    return request_header([policy])


def plan_mode(active: bool) -> Event:
    return Event(plan_mode=events_pb2.PlanMode(active=active))


def plan_selection(active: bool) -> Event:
    return Event(plan_selection=events_pb2.PlanSelection(active=active))


def command_run(command_id: str, args: str | None, name: str = "plan") -> Event:
    return Event(command_run=events_pb2.CommandRun(command_id=command_id, name=name, args=args))


def command_done(command_id: str, ok: bool, message: str = "") -> Event:
    kind = events_pb2.COMMAND_DONE_KIND_SUCCESS if ok else events_pb2.COMMAND_DONE_KIND_ERROR
    return Event(
        command_done=events_pb2.CommandDone(command_id=command_id, kind=kind, message=message)
    )


def user_message(text: str) -> Event:
    source = events_pb2.MessageSource(kind=events_pb2.SOURCE_KIND_USER)
    return Event(user_message=events_pb2.UserMessage(text=text, source=source))


def assistant_message(text: str) -> Event:
    return Event(assistant_message=events_pb2.AssistantMessage(text=text))


def numbered(events: Sequence[Event], first_seq: int = 0) -> list[Event]:
    """The events with the gapless seqs the log would give them."""
    result = []
    for seq, event in enumerate(events, start=first_seq):
        copy = Event()
        copy.CopyFrom(event)
        copy.seq = seq
        result.append(copy)
    return result
