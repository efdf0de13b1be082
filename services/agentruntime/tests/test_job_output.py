"""A background job's output read by offset: every byte once, in order,
whatever the reads' sizes, never a UTF-8 character cut, and the bytes no
longer held said so."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.agentruntime.capabilities.jobs.output import JobOutput

TEXT = "héllo wörld → 日本語 ✓\n" * 3


def read_all(output: JobOutput, limit: int) -> str:
    """Every read from offset 0, each from the offset the last gave back."""
    texts, offset = [], 0
    while offset < output.total:
        chunk = output.read(offset, limit)
        assert chunk.end > offset, "a read moves on"
        texts.append(chunk.text)
        offset = chunk.end
    return "".join(texts)


@given(
    pieces=st.lists(st.integers(1, 7), min_size=1, max_size=30),
    limit=st.integers(1, 64),
)
def test_reads_from_the_offsets_they_give_back_see_every_character_once(
    pieces: list[int], limit: int
) -> None:
    data = TEXT.encode()
    output = JobOutput()
    at = 0
    for size in pieces:  # written in pieces that cut characters
        output.feed(data[at : at + size])
        at += size
    output.feed(data[at:])
    output.close()
    assert read_all(output, limit) == TEXT


def test_a_character_still_being_written_is_not_read_half() -> None:
    output = JobOutput()
    output.feed("ok ✓".encode()[:-1])
    chunk = output.read(0, 100)
    assert chunk.text == "ok " and chunk.end == 3 and chunk.total == 5
    output.feed("✓".encode()[-1:])
    assert output.read(chunk.end, 100).text == "✓"


def test_an_offset_older_than_what_is_held_starts_at_the_oldest_byte_and_says_so() -> None:
    output = JobOutput(kept=10)
    output.feed(b"0123456789abcdef")
    chunk = output.read(0, 4)
    assert (chunk.text, chunk.start, chunk.skipped, chunk.total) == ("6789", 6, 6, 16)
    assert output.read(100, 4).text == "" and output.read(100, 4).start == 16


def test_the_tail_starts_at_a_line() -> None:
    output = JobOutput()
    output.feed(b"first line\nsecond line\nthird\n")
    assert output.tail(15) == "third\n"
    assert output.tail(1000) == "first line\nsecond line\nthird\n"
