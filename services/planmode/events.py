"""The log events plan mode writes."""

from __future__ import annotations

from agenthost.sessionlog.v1 import events_pb2

from agenthost_core.folds import PLAN_NOTICE_PLUGIN

from .command import PLAN_COMMAND_NAME

Event = events_pb2.Event

NOTICE_PLUGIN = PLAN_NOTICE_PLUGIN
NOTICE_FORM = "notice"
ENTERED_NOTICE = "The user switched this session to plan mode."
LEFT_NOTICE = "The user switched this session back to the default mode."


def plan_mode_event(active: bool) -> Event:
    return Event(plan_mode=events_pb2.PlanMode(active=active))


def plan_selection_event(active: bool) -> Event:
    """The intent of a choice that waits for the next boundary."""
    return Event(plan_selection=events_pb2.PlanSelection(active=active))


def switch_notice_event(active: bool) -> Event:
    """The plugin-sourced user message telling the model the user switched."""
    source = events_pb2.MessageSource(
        kind=events_pb2.SOURCE_KIND_PLUGIN, plugin=NOTICE_PLUGIN, form=NOTICE_FORM
    )
    text = ENTERED_NOTICE if active else LEFT_NOTICE
    return Event(user_message=events_pb2.UserMessage(text=text, source=source))


def command_run_event(command_id: str, args: str) -> Event:
    run = events_pb2.CommandRun(command_id=command_id, name=PLAN_COMMAND_NAME, args=args)
    return Event(command_run=run)


def command_done_event(command_id: str, ok: bool, message: str) -> Event:
    kind = events_pb2.COMMAND_DONE_KIND_SUCCESS if ok else events_pb2.COMMAND_DONE_KIND_ERROR
    done = events_pb2.CommandDone(command_id=command_id, kind=kind, message=message)
    return Event(command_done=done)
