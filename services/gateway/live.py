"""The text each session's running step (and command) has streamed so far,
as the gateway relays it.

Deltas come from the runtime's live stream and the logged record from the
session log: two streams, so the gateway orders them. When a step's
assistant/message is logged, whatever text the deltas have not yet carried
is sent first as one last delta, and later deltas of that step are dropped;
so clients always get the deltas before the logged message, and their
concatenation is its text. A command's output is closed the same way by
its logged tool/result: the output the deltas have not carried yet is sent
first (a command's result text is its status line, then its output, as the
shell tool writes it). A (re)connecting client gets the text so far of each
running stream at offset 0.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

# The tool whose calls stream output, and what it writes after its status line
# when a command printed nothing.
COMMAND_TOOL = "shell"
NO_OUTPUT = "(no output)"

TextKey = tuple[str, str, int, "rt.TextKind.ValueType"]  # session, turn, step, kind
OutputKey = tuple[str, str, str]  # session, turn, call
K = TypeVar("K", TextKey, OutputKey)


class LiveTexts:
    def __init__(self) -> None:
        self._texts: dict[TextKey, str] = {}
        self._outputs: dict[OutputKey, str] = {}
        self._closed: OrderedDict[tuple[object, ...], None] = OrderedDict()

    # -- deltas from the runtime ------------------------------------------------------

    def text(self, delta: rt.AssistantDelta) -> rt.AssistantDelta | None:
        """The part of `delta` clients have not had yet (None: nothing new)."""
        key = (delta.session_id, delta.turn_id, delta.step, delta.kind)
        fresh = self._add(self._texts, key, delta.offset, delta.text)
        if fresh is None:
            return None
        new = rt.AssistantDelta()
        new.CopyFrom(delta)
        new.offset, new.text = fresh
        return new

    def output(self, delta: rt.ToolOutputDelta) -> rt.ToolOutputDelta | None:
        """The part of a command's output clients have not had yet."""
        key = (delta.session_id, delta.turn_id, delta.call_id)
        fresh = self._add(self._outputs, key, delta.offset, delta.text)
        if fresh is None:
            return None
        new = rt.ToolOutputDelta()
        new.CopyFrom(delta)
        new.offset, new.text = fresh
        return new

    def _add(self, streams: dict[K, str], key: K, offset: int, text: str) -> tuple[int, str] | None:
        """Append what a piece adds to its stream: (its offset, the new text)."""
        if key in self._closed:
            return None
        held = streams.get(key, "")
        fresh = _fresh(held, offset, text)
        if fresh is None:
            return None
        streams[key] = held + fresh
        return len(held), fresh

    # -- the log's records close streams ----------------------------------------------------

    def finish_step(
        self, session_id: str, turn_id: str, step: int, text: str, reasoning: str
    ) -> list[rt.AssistantDelta]:
        """The step's message is logged: the deltas still owed, then closed."""
        owed = []
        for kind, whole in ((rt.TEXT_KIND_REASONING, reasoning), (rt.TEXT_KIND_ANSWER, text)):
            key = (session_id, turn_id, step, kind)
            held = self._texts.pop(key, "")
            self._close(key)
            if len(whole) > len(held) and whole.startswith(held):
                owed.append(
                    rt.AssistantDelta(
                        session_id=session_id,
                        turn_id=turn_id,
                        step=step,
                        kind=kind,
                        offset=len(held),
                        text=whole[len(held) :],
                    )
                )
        return owed

    def start_output(self, session_id: str, turn_id: str, call: ev.ToolCall) -> None:
        """A command's call is logged: its output stream is open."""
        if call.name == COMMAND_TOOL:
            self._outputs.setdefault((session_id, turn_id, call.call_id), "")

    def finish_output(
        self, session_id: str, turn_id: str, result: ev.ToolResult
    ) -> list[rt.ToolOutputDelta]:
        """A command's result is logged: the output still owed, then closed."""
        key = (session_id, turn_id, result.call_id)
        opened = key in self._outputs
        held = self._outputs.pop(key, "")
        self._close(key)
        if not opened:
            return []  # not a command (or one this gateway never saw called)
        whole = command_output(result)
        if len(whole) <= len(held) or not whole.startswith(held):
            return []  # nothing new, or a capped result that no longer extends it
        return [
            rt.ToolOutputDelta(
                session_id=session_id,
                turn_id=turn_id,
                call_id=result.call_id,
                offset=len(held),
                text=whole[len(held) :],
            )
        ]

    def finish_turn(self, session_id: str, turn_id: str) -> None:
        for key in [k for k in self._texts if k[:2] == (session_id, turn_id)]:
            del self._texts[key]
            self._close(key)
        for okey in [k for k in self._outputs if k[:2] == (session_id, turn_id)]:
            del self._outputs[okey]
            self._close(okey)

    # -- snapshots ------------------------------------------------------------------------

    def snapshot(self, session_id: str) -> tuple[list[rt.AssistantDelta], list[rt.ToolOutputDelta]]:
        """The text so far of the session's running streams, at offset 0."""
        texts = [
            rt.AssistantDelta(session_id=s, turn_id=turn, step=step, kind=kind, offset=0, text=text)
            for (s, turn, step, kind), text in self._texts.items()
            if s == session_id and text
        ]
        outputs = [
            rt.ToolOutputDelta(session_id=s, turn_id=turn, call_id=call, offset=0, text=text)
            for (s, turn, call), text in self._outputs.items()
            if s == session_id and text
        ]
        return texts, outputs

    def _close(self, key: tuple[object, ...]) -> None:
        self._closed[key] = None
        self._closed.move_to_end(key)
        # Late deltas of the closed streams remembered are dropped.
        while len(self._closed) > rt.LIVE_LIMIT_ENDED_STREAMS_KEPT:
            self._closed.popitem(last=False)


def command_output(result: ev.ToolResult) -> str:
    """The output a command's logged result holds: its text after the status line."""
    text = result.output if result.ok else result.error
    _status, newline, output = text.partition("\n")
    return output if newline and output != NO_OUTPUT else ""


def _fresh(held: str, offset: int, text: str) -> str | None:
    """What a piece at `offset` adds to `held`; None when it adds nothing or
    leaves a gap (the runtime's snapshot or the logged record fills it)."""
    if offset > len(held) or offset + len(text) <= len(held):
        return None
    return text[len(held) - offset :]
