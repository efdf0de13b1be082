"""A session's past as the chat shows it when it opens (`--continue`,
`--resume`) and on `/history`: whole turns, never the middle of one, each
tool call on one line (`· $ pytest -q (exit 1)`, `· edit x.py (+3 -1)`,
`· $ rm -r build: denied`), with the cancels, failures, plan switches and
compaction markers between them."""

from __future__ import annotations

from dataclasses import dataclass

from agenthost.sessionlog.v1 import events_pb2 as ev
from rich.console import RenderableType
from rich.markdown import Markdown
from rich.text import Text

from agenthost_core import images
from agenthost_core.folds import PLAN_NOTICE_PLUGIN, committed_plan

from . import render
from .live_markdown import has_markdown

PLAN_STYLE = "bold magenta"


@dataclass(frozen=True)
class Turn:
    """A turn's events: from its turn/start to the next one (what falls
    between two turns, a plan switch or a compaction, goes with the first)."""

    turn_id: str
    events: tuple[ev.Event, ...]


@dataclass(frozen=True)
class Past:
    """The events before the first turn (none when the window starts in the
    middle of a turn: those belong to an earlier one), and the turns."""

    before: tuple[ev.Event, ...]
    turns: tuple[Turn, ...]


def split_turns(events: list[ev.Event], from_the_start: bool) -> Past:
    """`events` as turns; `from_the_start`: the window begins at the log's
    first event, so what precedes the first turn is no turn's tail."""
    starts = [i for i, e in enumerate(events) if e.HasField("turn_start")]
    first = starts[0] if starts else len(events)
    before = tuple(events[:first]) if from_the_start else ()
    ends = [*starts[1:], len(events)]
    turns = tuple(
        Turn(events[start].turn_start.turn_id, tuple(events[start:end]))
        for start, end in zip(starts, ends, strict=False)  # no starts: no turns
    )
    return Past(before, turns)


def event_lines(events: tuple[ev.Event, ...] | list[ev.Event]) -> list[RenderableType]:
    """What the chat shows of these past events, compactly."""
    listed = list(events)
    answers = render.call_answers(listed)
    calls = {e.tool_call.call_id: e.tool_call for e in listed if e.HasField("tool_call")}
    finished = {e.tool_result.call_id for e in listed if e.HasField("tool_result")}
    shown: list[RenderableType] = []
    for event in listed:
        kind = event.WhichOneof("body")
        if kind == "user_message":
            shown += user_lines(event.user_message)
        elif kind == "assistant_message" and event.assistant_message.text:
            shown += answer_lines(event.assistant_message.text)
        elif kind == "tool_result":
            result = event.tool_result
            call, answer = calls.get(result.call_id), answers.get(result.call_id)
            style = "dim" if result.ok else "red"
            if answer is not None and answer.WhichOneof("kind") in render.ANSWER_LINES:
                style = "yellow"
            shown.append(Text(f"· {render.result_line(result, call, answer)}", style=style))
        elif kind == "turn_end":
            for call_id, call in calls.items():  # what the turn left unfinished
                if call_id not in finished:
                    shown.append(Text(f"· {render.call_line(call)} (not finished)", "yellow"))
            finished |= set(calls)
            ending = render.turn_end_line(event.turn_end)
            if ending is not None:
                shown.append(Text(*ending))
        elif kind == "compaction":
            shown.append(Text(render.compaction_line(event.compaction), "dim"))
        elif kind == "hook_run":
            shown.append(Text(render.hook_line(event.hook_run), "dim"))
        elif (active := committed_plan(event)) is not None:
            shown.append(Text(f"plan mode {'on' if active else 'off'}", PLAN_STYLE))
    return shown


def user_lines(message: ev.UserMessage) -> list[RenderableType]:
    if message.source.kind != ev.SOURCE_KIND_PLUGIN:
        return [Text(f"you: {message.text}", "green"), *image_lines(message)]
    if message.source.plugin == PLAN_NOTICE_PLUGIN:
        return []  # the plan switch's own line says it
    return [Text(f"notice: {message.text}", "dim")]


def image_lines(message: ev.UserMessage) -> list[RenderableType]:
    """A line per image the message sent: "[image: shot.png, 12 KB]"."""
    return [
        Text(f"[image: {i.name or i.media_type}, {images.size_text(i.size)}]", "dim")
        for i in message.images
    ]


def answer_lines(text: str) -> list[RenderableType]:
    """An answer shown whole: one plain line stays a line, anything more is markdown."""
    if "\n" not in text.strip() and not has_markdown(text):
        return [Text(f"assistant: {text}", "cyan")]
    return [Text("assistant:", "cyan"), Markdown(text)]


def earlier_line(count: int, more: bool = False) -> Text:
    """The hint above what is shown when earlier turns exist."""
    many = count != 1 or more
    counted = f"{count}{'+' if more else ''} earlier turn{'s' if many else ''}"
    return Text(f"── {counted}: /history shows {'them' if many else 'it'} ──", "dim")
