"""A compaction, run: the model summarises the view so far, and the view
from then on is the summary and what follows (compaction.py says when and
with which texts; transcript.py applies the recorded event).

A compaction in the middle of a turn (at a boundary, automatically or
after the provider refused a request as too long) keeps that turn's user
messages and its latest tool exchange verbatim after the summary when they
fit, so the model goes on with the work it was doing rather than from a
summary of it. `/compact` between turns keeps nothing of the conversation.
Every compaction carries the context the capabilities give it (the
repository's instructions, the task list): the view starts with it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass

from agenthost.sessionlog.v1 import events_pb2 as ev

from .compaction import MANUAL, fallback_summary, summary_request, view_tokens
from .models.base import (
    ChatMessage,
    ModelAdapter,
    ModelError,
    ModelRequest,
    StreamedAnswer,
    UserMessage,
)
from .request_size import ADDED_MARGIN, predicted_tokens
from .transcript import Entry, Transcript, TurnTail

# What of a summary is recorded (the event's limit).
SUMMARY_BYTES = 200_000


class ContextOverflow(ModelError):
    """The step's request does not fit the model's window even compacted."""

    def __init__(self, context_window: int, detail: str) -> None:
        super().__init__(
            f"context overflow: the conversation does not fit the model's context window "
            f"({context_window} tokens) even after compacting it ({detail}). Run /compact "
            "with a focus to keep less, or choose a model with a larger context window.",
            retryable=False,
            context_overflow=True,
        )


@dataclass(frozen=True)
class CompactionAsk:
    trigger: str
    model: ModelAdapter
    transcript: Transcript
    sections: Sequence[ev.PromptSection]
    tools: Sequence[ev.ToolSchema]
    # The last seq the summary covers (the fold's, when it was asked).
    up_to_seq: int
    # The most the view after it may take, as the provider counts.
    limit_tokens: int
    # The provider's tokens per estimated token, as last seen.
    ratio: float = 1.0
    focus: str = ""
    # The capabilities' context the view starts with again.
    carried: Sequence[ev.ContextAdded] = ()


@dataclass(frozen=True)
class Compacted:
    compaction: ev.Compaction
    # The summary request's answer (its usage is recorded with the compaction).
    answer: StreamedAnswer
    # The turn's latest tool results did not fit after the summary: a model
    # going on from the summary alone would call for them again, and again.
    results_dropped: bool = False


async def compact(ask: CompactionAsk) -> Compacted:
    messages = ask.transcript.messages()
    tail = TurnTail() if ask.trigger == MANUAL else ask.transcript.turn_tail()
    answer = await summarise(ask.model, messages, ask.sections, ask.focus, ask.ratio)
    summary = (answer.text.strip() or fallback_summary(messages))[:SUMMARY_BYTES]
    kept = _fitting(summary, tail, ask)
    before = ModelRequest(messages=messages, sections=ask.sections, tools=ask.tools)
    compaction = ev.Compaction(
        summary=summary,
        up_to_seq=ask.up_to_seq,
        tokens_before=before.estimated_tokens(),
        tokens_after=view_tokens(summary, ask.sections, ask.tools, _after(ask, kept)),
        trigger=ask.trigger,
        focus=ask.focus[:4096],
        kept=_ranges(kept, tail),
        context=ask.carried,
    )
    dropped = bool(tail.exchange) and not any(e in kept for e in tail.exchange)
    return Compacted(compaction, answer, results_dropped=dropped)


def _fitting(summary: str, tail: TurnTail, ask: CompactionAsk) -> list[Entry]:
    """The most of the turn's tail that fits after the summary: its prompts
    and latest exchange, else the exchange (the summary tells what was
    asked), else its prompts, else nothing."""
    candidates: tuple[list[Entry], ...] = (
        [*tail.prompts, *tail.exchange],
        [*tail.exchange],
        [*tail.prompts],
        [],
    )
    for kept in candidates:
        estimate = view_tokens(summary, ask.sections, ask.tools, _after(ask, kept))
        if predicted_tokens(estimate, None, ask.ratio * ADDED_MARGIN) <= ask.limit_tokens:
            return kept
    return []


def _after(ask: CompactionAsk, kept: Sequence[Entry]) -> list[ChatMessage]:
    """The messages besides the summary the view will start with."""
    return [*(UserMessage(c.text) for c in ask.carried), *(e.message for e in kept)]


def _ranges(kept: Sequence[Entry], tail: TurnTail) -> list[ev.SeqRange]:
    """The turn's turn/start (so a view rebuilt from the log knows the turn
    is open), each kept prompt, and the exchange as one run of events (the
    call, its results and what was recorded between them)."""
    if tail.turn_seq < 0:
        return []
    ranges = [ev.SeqRange(from_seq=tail.turn_seq, to_seq=tail.turn_seq)]
    ranges += [
        ev.SeqRange(from_seq=e.first_seq, to_seq=e.last_seq) for e in tail.prompts if e in kept
    ]
    exchange = [e for e in tail.exchange if e in kept]
    if exchange:
        ranges.append(ev.SeqRange(from_seq=exchange[0].first_seq, to_seq=exchange[-1].last_seq))
    return ranges


async def summarise(
    model: ModelAdapter,
    messages: Sequence[ChatMessage],
    sections: Sequence[ev.PromptSection],
    focus: str,
    ratio: float,
) -> StreamedAnswer:
    """The model's summary of `messages`, asked within the window less room
    for the answer (as the provider would count it); refused as too long,
    asked once more with half as much of the conversation."""
    window, room = model.context_window, model.max_output_tokens
    budget = int((window - room) / (max(ratio, 1.0) * ADDED_MARGIN))
    detail = ""
    for share in (1, 2):
        asked = summary_request(messages, sections, focus, budget // share)
        answer = StreamedAnswer()
        try:
            async with aclosing(model.stream(asked)) as chunks:
                async for chunk in chunks:
                    answer.add(chunk)
            return answer
        except ModelError as error:
            if not error.context_overflow:
                raise
            detail = error.message
    raise ContextOverflow(window, f"the summary request was refused too: {detail}")
