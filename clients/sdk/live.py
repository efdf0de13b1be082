"""The text a session's running step and command streamed so far, as a
client holds it (pure, no I/O).

Pieces arrive from the live stream, the text so far on (re)connect and in an
opened page, possibly overlapping: each carries its offset (in code points of
its stream), so what is already held is dropped and nothing shows twice. A
stream ends when the log records its whole value (the step's
assistant/message, the command's tool/result) or the turn ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from agenthost.runtime.v1 import runtime_pb2 as rt

ANSWER = "answer"
REASONING = "reasoning"
_KINDS = {rt.TEXT_KIND_ANSWER: ANSWER, rt.TEXT_KIND_REASONING: REASONING}


@dataclass(frozen=True)
class StepKey:
    """One stream of a step's text: its turn, step and kind."""

    turn_id: str
    step: int
    # "answer" or "reasoning".
    kind: str


def step_key(delta: rt.AssistantDelta) -> StepKey:
    """The stream a delta belongs to."""
    return StepKey(delta.turn_id, delta.step, _KINDS.get(delta.kind, ANSWER))


class LiveText:
    """The streamed text of a session's running steps and commands."""

    def __init__(self) -> None:
        self.texts: dict[StepKey, str] = {}
        self.outputs: dict[str, str] = {}
        # Pieces dropped because they left a gap (nothing on screen is wrong:
        # the logged record completes the text).
        self.gaps = 0

    def add_text(self, delta: rt.AssistantDelta) -> str:
        """What the piece adds to its step's text ("" when nothing)."""
        key = step_key(delta)
        held = self.texts.get(key, "")
        fresh = self._fresh(held, delta.offset, delta.text)
        if fresh:
            self.texts[key] = held + fresh
        return fresh

    def add_output(self, delta: rt.ToolOutputDelta) -> str:
        """What the piece adds to its command's output ("" when nothing)."""
        held = self.outputs.get(delta.call_id, "")
        fresh = self._fresh(held, delta.offset, delta.text)
        if fresh:
            self.outputs[delta.call_id] = held + fresh
        return fresh

    def text_of(self, turn_id: str, step: int, kind: str = ANSWER) -> str:
        """The text so far of one step ("" when none)."""
        return self.texts.get(StepKey(turn_id, step, kind), "")

    def end_step(self, turn_id: str, step: int) -> None:
        """The step's message is logged: its streams end."""
        for kind in (ANSWER, REASONING):
            self.texts.pop(StepKey(turn_id, step, kind), None)

    def end_output(self, call_id: str) -> None:
        """The command's result is logged: its output stream ends."""
        self.outputs.pop(call_id, None)

    def clear(self) -> None:
        """Forget every stream (the turn ended, or the history was replaced)."""
        self.texts.clear()
        self.outputs.clear()

    def _fresh(self, held: str, offset: int, text: str) -> str:
        if offset > len(held):
            self.gaps += 1
            return ""
        return text[len(held) - offset :] if offset + len(text) > len(held) else ""
