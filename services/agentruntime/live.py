"""Ephemeral text of what runs now: each step's streamed answer and
reasoning, and each command's output.

Not logged (no model sees it, and the finished assistant/message and
tool/result are logged), but held while it runs so a watcher that (re)joins
mid-step first gets the text so far, at offset 0, then the rest. Offsets
count code points of one stream, so a client drops what it already has.

Pieces travel at the pace of a reader, not of the model's tokenizer: a
stream's first piece, and a session's first piece after a quiet FRAME_S,
go out at once (after what waits); the pieces that come while the
session's frame is pending wait for it, sent when FRAME_S
has passed since the last frame went. Waiting pieces of one stream that
follow one another are merged into one delta; a piece of another stream
of the session starts another, so the deltas keep the order of the pieces
across the session's streams (a step's reasoning before its answer).
Past a stream's first piece, a session sends a frame every FRAME_S at most, each a delta or two down
the whole way (one message to the gateway, one frame to each client),
whatever the model's chunk size; its text and order are the model's.
Ending a stream (its step, its command, its turn) first sends what waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

from services.common.errors import Unavailable

ANSWER = "answer"
REASONING = "reasoning"
# Pieces a watcher may have waiting before it is dropped (it rejoins and
# gets the text so far).
WATCH_BUFFER = 10_000
# At most one frame per stream this often (a display refreshes every 16 ms).
FRAME_S = 0.02
# Another frame, in milliseconds; 0 sends every piece at once (the bench's
# baseline: what streaming cost before frames).
FRAME_ENV = "AGENTHOST_LIVE_FRAME_MS"


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
# (session, turn, step, kind) of a step's text; (session, turn, call) of a command's output.
StreamKey = tuple[str, str, int, str] | tuple[str, str, str]


class Lagged(Unavailable):
    """The watcher fell WATCH_BUFFER pieces behind; watch again."""

    REASON = "LIVE_LAGGED"

    def __init__(self) -> None:
        super().__init__(self.REASON, "the live watcher fell behind; watch again")


@dataclass
class _Stream:
    """One stream's text sent so far."""

    sent: list[str] = field(default_factory=list)
    length: int = 0

    def add(self, text: str) -> int:
        """`text` sent after the rest; its offset."""
        offset = self.length
        self.sent.append(text)
        self.length += len(text)
        return offset


@dataclass
class _Frame:
    """A session's frame: its window, and the pieces waiting for it, as
    runs of one stream each, in the order they came."""

    window: asyncio.TimerHandle | None = None
    runs: list[tuple[StreamKey, list[str]]] = field(default_factory=list)


Streams = dict[StreamKey, _Stream]


class LiveFeed:
    def __init__(self, frame_s: float = FRAME_S) -> None:
        self._frame_s = frame_s
        self._texts: Streams = {}
        self._outputs: Streams = {}
        self._frames: dict[str, _Frame] = {}
        self._watchers: set[asyncio.Queue[LiveDelta | None]] = set()
        # Set by end_watchers(): a None in a queue then means "ended", not "lagged".
        self._ending = False

    def text(self, session_id: str, turn_id: str, step: int, kind: str, piece: str) -> None:
        self._add(self._texts, (session_id, turn_id, step, kind), piece)

    def output(self, session_id: str, turn_id: str, call_id: str, piece: str) -> None:
        self._add(self._outputs, (session_id, turn_id, call_id), piece)

    def end_step(self, session_id: str, turn_id: str, step: int) -> None:
        for kind in (ANSWER, REASONING):
            self._end(self._texts, (session_id, turn_id, step, kind))

    def end_output(self, session_id: str, turn_id: str, call_id: str) -> None:
        self._end(self._outputs, (session_id, turn_id, call_id))

    def end_turn(self, session_id: str, turn_id: str) -> None:
        for key in [k for k in self._texts if k[:2] == (session_id, turn_id)]:
            self._end(self._texts, key)
        for out in [k for k in self._outputs if k[:2] == (session_id, turn_id)]:
            self._end(self._outputs, out)

    def snapshot(self) -> list[LiveDelta]:
        """The text so far of everything running, each at offset 0 (what
        waits for its frame included: the frame then repeats it, at an
        offset the watcher drops)."""
        waiting: dict[StreamKey, list[str]] = {}
        for frame in self._frames.values():
            for key, pieces in frame.runs:
                waiting.setdefault(key, []).extend(pieces)
        streams = [*self._texts.items(), *self._outputs.items()]
        return [
            _delta(key, 0, "".join([*stream.sent, *waiting.get(key, [])]))
            for key, stream in streams
        ]

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

    # -- frames ---------------------------------------------------------------------

    def _add(self, streams: Streams, key: StreamKey, piece: str) -> None:
        stream = streams.get(key)
        frame = self._frames.get(key[0])
        if stream is None:  # a stream's first piece goes now, after what waits
            stream = streams[key] = _Stream()
            if frame is not None:
                self._send(frame)
                self._publish(_delta(key, stream.add(piece), piece))
                return
        if frame is None:  # no frame pending: this piece goes now
            self._publish(_delta(key, stream.add(piece), piece))
            self._hold(key[0], _Frame())
        elif frame.runs and frame.runs[-1][0] == key:
            frame.runs[-1][1].append(piece)
        else:
            frame.runs.append((key, [piece]))

    def _hold(self, session_id: str, frame: _Frame) -> None:
        """The session's next pieces wait FRAME_S for their frame."""
        if self._frame_s <= 0:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to wait on (a synchronous caller): every piece goes at once
        self._frames[session_id] = frame
        frame.window = loop.call_later(self._frame_s, self._frame_ends, session_id, frame)

    def _frame_ends(self, session_id: str, frame: _Frame) -> None:
        if self._frames.get(session_id) is not frame:
            return
        del self._frames[session_id]
        if frame.runs:  # else quiet for a whole frame: the next piece goes at once
            self._send(frame)
            self._hold(session_id, _Frame())

    def _send(self, frame: _Frame) -> None:
        """The frame's runs, a delta each, in order."""
        for key, pieces in frame.runs:
            stream = self._texts.get(key) if len(key) == 4 else self._outputs.get(key)
            if stream is not None:
                text = "".join(pieces)
                self._publish(_delta(key, stream.add(text), text))
        frame.runs.clear()

    def _end(self, streams: Streams, key: StreamKey) -> None:
        """What waits in the session's frame goes first (it may precede
        this stream's last pieces), then the stream is no more."""
        frame = self._frames.get(key[0])
        if frame is not None:
            self._send(frame)
        streams.pop(key, None)

    def _publish(self, delta: LiveDelta) -> None:
        for queue in list(self._watchers):
            if queue.qsize() >= WATCH_BUFFER:
                self._watchers.discard(queue)
                queue.put_nowait(None)
            else:
                queue.put_nowait(delta)


def frame_from_env(env: Mapping[str, str]) -> float:
    """The frame FRAME_ENV sets (seconds), else FRAME_S."""
    raw = env.get(FRAME_ENV, "").strip()
    if not raw:
        return FRAME_S
    try:
        milliseconds = float(raw)
    except ValueError:
        raise ValueError(f"{FRAME_ENV}={raw!r} is not a number of milliseconds") from None
    if not 0 <= milliseconds <= 1000:
        raise ValueError(f"{FRAME_ENV}={raw!r}: from 0 to 1000 ms")
    return milliseconds / 1000


def _delta(key: StreamKey, offset: int, text: str) -> LiveDelta:
    if len(key) == 4:
        session_id, turn_id, step, kind = key
        return TextDelta(session_id, turn_id, step, kind, offset, text)
    session_id, turn_id, call_id = key
    return OutputDelta(session_id, turn_id, call_id, offset, text)
