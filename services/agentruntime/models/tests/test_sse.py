"""The event-stream decoder: what a provider's bytes mean does not depend on
how the network cut them, nor on which line ending the server uses."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from services.agentruntime.models.sse import EventDataDecoder

STREAM = (
    b": keep-alive\n\n"
    b'data: {"a": 1}\n\n'
    b"event: ping\nid: 7\nretry: 100\n\n"  # no data: nothing to hand on
    b"data: first line\ndata:second line\ndata\n\n"
    + "data: caf\u00e9 \u2615\n\n".encode()
    + b"data: [DONE]\n\n"
)
EVENTS = ['{"a": 1}', "first line\nsecond line\n", "caf\u00e9 \u2615", "[DONE]"]


def decoded(blocks: list[bytes]) -> list[str]:
    decoder = EventDataDecoder()
    return [data for block in blocks for data in decoder.feed(block)]


def cut(data: bytes, at: list[int]) -> list[bytes]:
    edges = [0, *sorted(at), len(data)]
    return [data[start:end] for start, end in pairwise(edges)]


def test_each_event_gives_its_data_lines_joined() -> None:
    assert decoded([STREAM]) == EVENTS


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_cut_of_the_bytes_gives_the_same_events(at: list[int]) -> None:
    assert decoded(cut(STREAM, at)) == EVENTS


@given(
    st.sampled_from([b"\r\n", b"\r"]),
    st.lists(st.integers(min_value=0, max_value=2 * len(STREAM)), max_size=12),
)
def test_every_line_ending_means_the_same(ending: bytes, at: list[int]) -> None:
    stream = STREAM.replace(b"\n", ending)
    assert decoded(cut(stream, at)) == EVENTS


def test_an_empty_block_between_a_cr_and_its_lf_changes_nothing() -> None:
    assert decoded([b"data: one\r", b"", b"\ndata: two\r\n\r\n"]) == ["one\ntwo"]


def test_an_event_the_body_leaves_unfinished_is_dropped() -> None:
    assert decoded([b"data: done\n\ndata: half", b"way\n"]) == ["done"]
