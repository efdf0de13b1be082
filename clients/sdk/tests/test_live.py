"""Streamed text merges by offset: overlaps are dropped, nothing shows twice."""

from __future__ import annotations

import itertools
import random

from agenthost.runtime.v1 import runtime_pb2 as rt
from hypothesis import given
from hypothesis import strategies as st

from clients.sdk.live import LiveText


def delta(offset: int, text: str, step: int = 0) -> rt.AssistantDelta:
    return rt.AssistantDelta(
        turn_id="t", step=step, kind=rt.TEXT_KIND_ANSWER, offset=offset, text=text
    )


def test_a_snapshot_after_pieces_adds_only_what_is_new() -> None:
    live = LiveText()
    assert live.add_text(delta(0, "Hel")) == "Hel"
    assert live.add_text(delta(0, "Hello wo")) == "lo wo"  # a reconnect's text so far
    assert live.add_text(delta(3, "lo")) == ""  # already held
    assert live.add_text(delta(8, "rld")) == "rld"
    assert live.text_of("t", 0) == "Hello world"


def test_a_piece_beyond_what_is_held_waits_for_the_text_before_it() -> None:
    live = LiveText()
    live.add_text(delta(0, "ab"))
    assert live.add_text(delta(5, "fg")) == ""
    assert live.gaps == 1 and live.text_of("t", 0) == "ab"
    assert live.add_text(delta(2, "cde")) == "cdefg"
    assert live.text_of("t", 0) == "abcdefg"


def test_pieces_relayed_after_the_open_snapshot_but_read_before_it_are_not_lost() -> None:
    """The gateway took OpenSession's text so far ("Alpha "), then relayed
    two pieces, which the stream delivered before OpenSession's reply."""
    live = LiveText()
    assert live.add_text(delta(6, "bravo ")) == ""
    assert live.add_text(delta(12, "charlie")) == ""
    assert live.add_text(delta(0, "Alpha ")) == "Alpha bravo charlie"
    assert live.add_text(delta(19, " delta")) == " delta"
    assert live.text_of("t", 0) == "Alpha bravo charlie delta"


def test_a_step_that_ends_drops_its_pieces_and_takes_no_late_ones() -> None:
    live = LiveText()
    live.add_text(delta(4, "late"))
    live.end_step("t", 0)
    # An OpenSession reply read before the step's message was logged.
    assert live.add_text(delta(0, "text so far")) == ""
    assert live.add_text(delta(0, "next step", step=1)) == "next step"


def test_a_turn_that_ends_takes_no_late_piece_of_any_of_its_streams() -> None:
    live = LiveText()
    live.add_text(delta(0, "Let me"))
    live.add_output(rt.ToolOutputDelta(turn_id="t", call_id="c", offset=0, text="line 1\n"))
    live.end_turn("t")  # the step failed: no message was logged
    # An OpenSession reply read before the turn ended: its text so far.
    assert live.add_text(delta(0, "Let me look")) == ""
    late_output = rt.ToolOutputDelta(turn_id="t", call_id="c", offset=0, text="line 1\nline 2\n")
    assert live.add_output(late_output) == ""
    assert live.texts == {} and live.outputs == {}
    next_turn = rt.AssistantDelta(turn_id="t2", kind=rt.TEXT_KIND_ANSWER, text="Next")
    assert live.add_text(next_turn) == "Next"


@given(st.text(min_size=1, max_size=40), st.lists(st.integers(0, 40), max_size=8))
def test_any_cut_of_a_text_redelivered_with_overlaps_gives_it_once(
    text: str, cuts: list[int]
) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    pieces = [delta(a, text[a:b]) for a, b in itertools.pairwise(bounds)]
    live = LiveText()
    shown = ""
    for index, piece in enumerate(pieces):
        shown += live.add_text(piece)
        if index % 2:  # a resumed stream re-sends the text so far
            shown += live.add_text(delta(0, text[: piece.offset + len(piece.text)]))
    assert shown == text == live.text_of("t", 0)


@given(st.text(min_size=1, max_size=40), st.lists(st.integers(0, 40), max_size=8), st.randoms())
def test_pieces_in_any_order_with_a_late_snapshot_give_the_text_once(
    text: str, cuts: list[int], order: random.Random
) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    pieces = [delta(a, text[a:b]) for a, b in itertools.pairwise(bounds)]
    snapshot_end = order.choice(bounds)
    order.shuffle(pieces)
    live = LiveText()
    shown = ""
    for piece in pieces:
        shown += live.add_text(piece)
    shown += live.add_text(delta(0, text[:snapshot_end]))
    assert shown == text == live.text_of("t", 0)
