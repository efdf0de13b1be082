"""The model's view of a session, read from its log: the transcript from the
latest compaction on (with the events that compaction kept), never from
seq 0. It is read the first time a model request needs it (loading an
agent for a status or a setting needs only the fold) and then kept up to
date as the agent folds new events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agenthost.sessionlog.v1 import events_pb2 as ev

from services.sessionlog.port import Direction, SessionLogPort

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


async def read_view(
    log: SessionLogPort, session_id: str, compaction_seq: int, until: int, spill_bytes: int
) -> Transcript:
    """The view as of `until`: the compaction at `compaction_seq` (-1: none),
    the events it kept, and the events after what it covered."""
    transcript = Transcript(spill_bytes)
    start = -1
    if compaction_seq >= 0:
        read = await log.read(session_id, from_seq=compaction_seq, limit=1)
        compaction = next((e for e in read.events if e.HasField("compaction")), None)
        if compaction is not None:
            transcript.add(compaction)
            for kept in compaction.compaction.kept:
                async for event in read_forward(log, session_id, kept.from_seq - 1, kept.to_seq):
                    transcript.add(event)
            start = compaction.compaction.up_to_seq
    async for event in read_forward(log, session_id, start, until):
        transcript.add(event)
    return transcript
