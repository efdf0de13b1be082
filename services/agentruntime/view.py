"""The model's view of a session, read from its log: the transcript from the
latest compaction on (with the events that compaction kept), never from
seq 0, and the capabilities' session parts that follow the same events
(capability.py). It is read the first time a model request needs it
(loading an agent for a status or a setting needs only the fold), then
kept up to date as the agent folds new events; a compaction starts a new
view, read again from the log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import SessionState
from services.sessionlog.port import Direction, SessionLogPort

from .capability import SessionPart
from .models.base import ChatMessage
from .transcript import Transcript

READ_BATCH = 1000


async def read_forward(
    log: SessionLogPort, session_id: str, after_seq: int, until: int | None = None
) -> AsyncIterator[ev.Event]:
    """The events after `after_seq` (up to `until`, when given), by batches."""
    seq = after_seq
    while True:
        batch = (
            await log.read(
                session_id, from_seq=seq + 1, direction=Direction.FORWARD, limit=READ_BATCH
            )
        ).events
        for event in batch:
            if until is not None and event.seq > until:
                return
            yield event
        # A short batch is the log's end; one that reached `until` holds all
        # that was asked (reading on would cost a call for nothing).
        if len(batch) < READ_BATCH or (until is not None and batch[-1].seq >= until):
            return
        seq = batch[-1].seq


class ModelView:
    """The transcript and the parts that follow it (by capability), fed the
    same events."""

    def __init__(self, transcript: Transcript, parts: Mapping[str, SessionPart]) -> None:
        self.transcript = transcript
        self.parts = dict(parts)

    def add(self, event: ev.Event) -> None:
        self.transcript.add(event)
        for part in self.parts.values():
            part.observe(event)

    def messages(self) -> list[ChatMessage]:
        return self.transcript.messages()


async def read_view(
    log: SessionLogPort, session_id: str, state: SessionState, view: ModelView
) -> ModelView:
    """`view` (new, empty) fed the events of the folded `state`'s view: the
    compaction it starts from (if any), the events that compaction kept, and
    those after what it covered that no rewind took out."""
    compaction_seq, until = state.last_compaction_seq, state.last_seq
    start = -1
    if compaction_seq >= 0:
        read = await log.read(session_id, from_seq=compaction_seq, limit=1)
        compaction = next((e for e in read.events if e.HasField("compaction")), None)
        if compaction is not None:
            view.add(compaction)
            for kept in compaction.compaction.kept:
                async for event in read_forward(log, session_id, kept.from_seq - 1, kept.to_seq):
                    view.add(event)
            start = compaction.compaction.up_to_seq
    async for event in read_forward(log, session_id, start, until):
        # The compaction itself comes again after what it covered: once is enough.
        if event.seq != compaction_seq and state.in_view(event.seq):
            view.add(event)
    return view
