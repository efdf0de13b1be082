"""Ephemeral text of what runs now: each step's streamed answer and
reasoning, and each command's output.

Not logged (no model sees it, and the finished assistant/message and
tool/result are logged), but held while it runs so a watcher that (re)joins
mid-step first gets the text so far, at offset 0, then the rest. Offsets
count code points of one stream, so a client drops what it already has.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from services.common.errors import Unavailable

ANSWER = "answer"
REASONING = "reasoning"
# Pieces a watcher may have waiting before it is dropped (it rejoins and
# gets the text so far).
WATCH_BUFFER = 10_000


@dataclass(frozen=True)
class TextDelta:
    session_id: str
    turn_id: str
    step: int
    kind: str
    offset: int
    text: str


@dataclass(frozen=True)
class OutputDelta:
    session_id: str
    turn_id: str
    call_id: str
    offset: int
    text: str


LiveDelta = TextDelta | OutputDelta


class Lagged(Unavailable):
    """The watcher fell WATCH_BUFFER pieces behind; watch again."""

    REASON = "LIVE_LAGGED"

    def __init__(self) -> None:
        super().__init__(self.REASON, "the live watcher fell behind; watch again")


class LiveFeed:
    def __init__(self) -> None:
        self._texts: dict[tuple[str, str, int, str], str] = {}
        self._outputs: dict[tuple[str, str, str], str] = {}
        self._watchers: set[asyncio.Queue[LiveDelta | None]] = set()
        # Set by end_watchers(): a None in a queue then means "ended", not "lagged".
        self._ending = False

    def text(self, session_id: str, turn_id: str, step: int, kind: str, piece: str) -> None:
        key = (session_id, turn_id, step, kind)
        held = self._texts.get(key, "")
        self._texts[key] = held + piece
        self._publish(TextDelta(session_id, turn_id, step, kind, len(held), piece))

    def output(self, session_id: str, turn_id: str, call_id: str, piece: str) -> None:
        key = (session_id, turn_id, call_id)
        held = self._outputs.get(key, "")
        self._outputs[key] = held + piece
        self._publish(OutputDelta(session_id, turn_id, call_id, len(held), piece))

    def end_step(self, session_id: str, turn_id: str, step: int) -> None:
        for kind in (ANSWER, REASONING):
            self._texts.pop((session_id, turn_id, step, kind), None)

    def end_output(self, session_id: str, turn_id: str, call_id: str) -> None:
        self._outputs.pop((session_id, turn_id, call_id), None)

    def end_turn(self, session_id: str, turn_id: str) -> None:
        self._texts = {k: v for k, v in self._texts.items() if k[:2] != (session_id, turn_id)}
        self._outputs = {k: v for k, v in self._outputs.items() if k[:2] != (session_id, turn_id)}

    def snapshot(self) -> list[LiveDelta]:
        """The text so far of everything running, each at offset 0."""
        texts: list[LiveDelta] = [TextDelta(*key, 0, text) for key, text in self._texts.items()]
        outputs = [OutputDelta(*key, 0, text) for key, text in self._outputs.items()]
        return [*texts, *outputs]

    async def watch(self) -> AsyncIterator[LiveDelta]:
        """The snapshot, then every piece as it comes. Raises Lagged."""
        queue: asyncio.Queue[LiveDelta | None] = asyncio.Queue()
        for held in self.snapshot():
            queue.put_nowait(held)
        self._watchers.add(queue)
        try:
            while (delta := await queue.get()) is not None:
                yield delta
            if not self._ending:
                raise Lagged()
        finally:
            self._watchers.discard(queue)

    def end_watchers(self) -> None:
        """Before shutdown: every watch ends (its client watches again)."""
        self._ending = True
        for queue in self._watchers:
            queue.put_nowait(None)

    def _publish(self, delta: LiveDelta) -> None:
        for queue in list(self._watchers):
            if queue.qsize() >= WATCH_BUFFER:
                self._watchers.discard(queue)
                queue.put_nowait(None)
            else:
                queue.put_nowait(delta)
