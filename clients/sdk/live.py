"""The text a session's running step and command streamed so far, as a
client holds it (pure, no I/O).

Pieces arrive from the live stream, the text so far on (re)connect and in an
opened page, possibly overlapping: each carries its offset (in code points of
its stream), so what is already held is dropped and nothing shows twice. A
piece may also arrive before the text it follows: one relayed just after the
gateway took OpenSession's text so far reaches the stream before that reply
does. It is kept (up to EARLY_KEPT a stream) and added once the text before
it is held. A stream ends when the log records its whole value (the step's
assistant/message, the command's tool/result) or the turn ends; a stream
that ended takes no late piece (of the streams and turns remembered:
runtime.proto's LIVE_LIMIT_ENDED_STREAMS_KEPT, as the gateway keeps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from agenthost.runtime.v1 import runtime_pb2 as rt

ANSWER = "answer"
REASONING = "reasoning"
_KINDS = {rt.TEXT_KIND_ANSWER: ANSWER, rt.TEXT_KIND_REASONING: REASONING}
# Pieces kept per stream while the text before them has not arrived.
EARLY_KEPT = 256


@dataclass(frozen=True)
class StepKey:
    """One stream of a step's text: its turn, step and kind."""

    turn_id: str
    step: int
    # "answer" or "reasoning".
    kind: str


@dataclass(frozen=True)
class EndedTurn:
    """A turn whose end is logged: all its streams ended."""

    turn_id: str


def step_key(delta: rt.AssistantDelta) -> StepKey:
    """The stream a delta belongs to."""
    return StepKey(delta.turn_id, delta.step, _KINDS.get(delta.kind, ANSWER))


K = TypeVar("K", StepKey, str)


class LiveText:
    """The streamed text of a session's running steps and commands."""

    def __init__(self) -> None:
        self.texts: dict[StepKey, str] = {}
        self.outputs: dict[str, str] = {}
        # Pieces that arrived beyond what was held (kept until the text before
        # them arrives; the logged record completes the text in any case).
        self.gaps = 0
        # Those pieces, (offset, text) by stream (its text key or command id).
        self._early: dict[StepKey | str, list[tuple[int, str]]] = {}
        self._ended: dict[StepKey | str | EndedTurn, None] = {}

    def add_text(self, delta: rt.AssistantDelta) -> str:
        """What the piece adds to its step's text ("" when nothing)."""
        if EndedTurn(delta.turn_id) in self._ended:
            return ""
        return self._add(self.texts, step_key(delta), delta.offset, delta.text)

    def add_output(self, delta: rt.ToolOutputDelta) -> str:
        """What the piece adds to its command's output ("" when nothing)."""
        if EndedTurn(delta.turn_id) in self._ended:
            return ""
        return self._add(self.outputs, delta.call_id, delta.offset, delta.text)

    def text_of(self, turn_id: str, step: int, kind: str = ANSWER) -> str:
        """The text so far of one step ("" when none)."""
        return self.texts.get(StepKey(turn_id, step, kind), "")

    def end_step(self, turn_id: str, step: int) -> None:
        """The step's message is logged: its streams end."""
        for kind in (ANSWER, REASONING):
            self.texts.pop(StepKey(turn_id, step, kind), None)
            self._end(StepKey(turn_id, step, kind))

    def end_output(self, call_id: str) -> None:
        """The command's result is logged: its output stream ends."""
        self.outputs.pop(call_id, None)
        self._end(call_id)

    def end_turn(self, turn_id: str) -> None:
        """The turn ended: every stream ends, and none of the turn's takes a
        late piece (also one whose step logged no message: a failed step)."""
        self.texts.clear()
        self.outputs.clear()
        self._early.clear()
        self._end(EndedTurn(turn_id))

    def restart(self) -> None:
        """The history was replaced: the streams begin again from the text so
        far the reply carries; pieces that arrived ahead of it wait for it."""
        self.texts.clear()
        self.outputs.clear()

    def _end(self, key: StepKey | str | EndedTurn) -> None:
        if not isinstance(key, EndedTurn):
            self._early.pop(key, None)
        self._ended[key] = None
        # How many the gateway and every client keep (the contract's number).
        while len(self._ended) > rt.LIVE_LIMIT_ENDED_STREAMS_KEPT:
            del self._ended[next(iter(self._ended))]

    def _add(self, streams: dict[K, str], key: K, offset: int, text: str) -> str:
        if key in self._ended:
            return ""
        held = streams.get(key, "")
        if offset > len(held):
            self._keep_early(key, offset, text)
            return ""
        grown = self._with_early(key, held + _past(held, offset, text))
        if len(grown) > len(held):
            streams[key] = grown
        return grown[len(held) :]

    def _keep_early(self, key: StepKey | str, offset: int, text: str) -> None:
        self.gaps += 1
        early = self._early.setdefault(key, [])
        early.append((offset, text))
        del early[:-EARLY_KEPT]

    def _with_early(self, key: StepKey | str, held: str) -> str:
        """`held` with the early pieces it now reaches, in offset order."""
        early = self._early.get(key)
        while early:
            offset, text = min(early)
            if offset > len(held):
                break
            early.remove((offset, text))
            held += _past(held, offset, text)
        if not early:
            self._early.pop(key, None)
        return held


def _past(held: str, offset: int, text: str) -> str:
    """The part of a piece at `offset` past the `held` text (offset <= len(held))."""
    return text[len(held) - offset :] if offset + len(text) > len(held) else ""
