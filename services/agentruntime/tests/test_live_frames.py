"""The live feed sends a stream's first piece at once and merges the pieces
that come while a frame is pending; what a watcher rebuilds from the deltas'
offsets is the model's text, in order, whenever it joined and however the
stream ended (its step, its turn, a cancel)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from services.agentruntime.live import ANSWER, REASONING, LiveDelta, LiveFeed, TextDelta

WAIT_S = 10.0
# A frame no test outlives: what it holds goes out only when its stream ends.
LONG_FRAME_S = 3600.0
PIECES = ["Hel", "lo, ", "wörld", " ✓", "", "!"]


class Watcher:
    """A watch of the feed: the deltas it got, and the text they rebuild
    (offsets as a client reads them: what it has already is dropped)."""

    def __init__(self, feed: LiveFeed) -> None:
        self.deltas: list[LiveDelta] = []
        self.texts: dict[tuple[object, ...], str] = {}
        self._got = asyncio.Condition()
        self._stream: AsyncIterator[LiveDelta] = feed.watch()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for delta in self._stream:
            key = (*_key(delta),)
            held = self.texts.get(key, "")
            assert delta.offset <= len(held), (held, delta)  # never a gap
            self.texts[key] = held[: delta.offset] + delta.text
            assert self.texts[key].startswith(held)  # a repeat only says it again
            async with self._got:
                self.deltas.append(delta)
                self._got.notify_all()

    async def until(self, count: int) -> None:
        async with asyncio.timeout(WAIT_S), self._got:
            await self._got.wait_for(lambda: len(self.deltas) >= count)

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def _key(delta: LiveDelta) -> tuple[object, ...]:
    if isinstance(delta, TextDelta):
        return (delta.session_id, delta.turn_id, delta.step, delta.kind)
    return (delta.session_id, delta.turn_id, delta.call_id)


async def test_the_first_piece_goes_at_once_and_the_rest_in_one_frame_at_the_steps_end() -> None:
    feed = LiveFeed(frame_s=LONG_FRAME_S)
    watcher = Watcher(feed)
    await asyncio.sleep(0)  # one turn of the loop: the watch runs to its first wait
    for piece in PIECES:
        feed.text("s", "t", 0, ANSWER, piece)
    await watcher.until(1)
    assert [(d.offset, d.text) for d in watcher.deltas] == [(0, "Hel")]
    feed.end_step("s", "t", 0)
    await watcher.until(2)
    assert [(d.offset, d.text) for d in watcher.deltas] == [(0, "Hel"), (3, "lo, wörld ✓!")]
    assert watcher.texts[("s", "t", 0, ANSWER)] == "".join(PIECES)
    await watcher.close()


async def test_a_frame_pending_goes_out_when_its_window_ends() -> None:
    feed = LiveFeed(frame_s=0.01)
    watcher = Watcher(feed)
    await asyncio.sleep(0)
    for piece in PIECES:
        feed.text("s", "t", 0, REASONING, piece)
    await watcher.until(2)  # the first at once, the rest when the frame's time is up
    assert [d.text for d in watcher.deltas] == ["Hel", "lo, wörld ✓!"]
    feed.text("s", "t", 0, REASONING, " more")
    feed.end_turn("s", "t")
    await watcher.until(3)
    assert watcher.texts[("s", "t", 0, REASONING)] == "".join(PIECES) + " more"
    assert feed.snapshot() == []
    await watcher.close()


async def test_a_watcher_joining_while_a_frame_is_pending_gets_the_text_so_far_once() -> None:
    feed = LiveFeed(frame_s=LONG_FRAME_S)
    first = Watcher(feed)
    await asyncio.sleep(0)
    feed.output("s", "t", "call-1", "line 1\n")
    feed.output("s", "t", "call-1", "line 2\n")  # pending
    late = Watcher(feed)
    await late.until(1)
    assert [(d.offset, d.text) for d in late.deltas] == [(0, "line 1\nline 2\n")]
    feed.output("s", "t", "call-1", "line 3\n")
    feed.end_output("s", "t", "call-1")
    await late.until(2)
    await first.until(2)
    for watcher in (first, late):
        assert watcher.texts[("s", "t", "call-1")] == "line 1\nline 2\nline 3\n"
    # The pending frame repeats what the late watcher had from its snapshot: at
    # an offset inside it, which a client drops.
    assert (late.deltas[1].offset, late.deltas[1].text) == (7, "line 2\nline 3\n")
    await first.close()
    await late.close()


async def test_streams_of_several_steps_and_sessions_keep_their_own_frames() -> None:
    feed = LiveFeed(frame_s=LONG_FRAME_S)
    watcher = Watcher(feed)
    await asyncio.sleep(0)
    for n in range(3):
        for session in ("a", "b"):
            feed.text(session, "t", n, ANSWER, f"{session}{n} one ")
            feed.text(session, "t", n, ANSWER, f"{session}{n} two")
    await watcher.until(6)  # the first piece of each of the six streams, at once
    for session in ("a", "b"):
        for n in range(3):
            feed.end_step(session, "t", n)
    await watcher.until(12)
    assert watcher.texts == {
        (session, "t", n, ANSWER): f"{session}{n} one {session}{n} two"
        for session in ("a", "b")
        for n in range(3)
    }
    await watcher.close()


async def test_the_deltas_keep_the_order_of_the_pieces_across_a_sessions_streams() -> None:
    feed = LiveFeed(frame_s=LONG_FRAME_S)
    watcher = Watcher(feed)
    await asyncio.sleep(0)  # one turn of the loop: the watch runs to its first wait
    feed.text("s", "t", 0, REASONING, "Think")
    feed.text("s", "t", 0, REASONING, "ing.")  # waits
    feed.text("s", "t", 0, ANSWER, "So ")  # a new stream: what waits goes first, then this
    feed.text("s", "t", 0, ANSWER, "the ")
    feed.output("s", "t", "call-1", "out")
    feed.text("s", "t", 0, ANSWER, "end.")
    feed.end_turn("s", "t")
    await watcher.until(6)
    assert [(type(d).__name__, d.offset, d.text) for d in watcher.deltas] == [
        ("TextDelta", 0, "Think"),
        ("TextDelta", 5, "ing."),
        ("TextDelta", 0, "So "),
        ("TextDelta", 3, "the "),
        ("OutputDelta", 0, "out"),
        ("TextDelta", 7, "end."),
    ]
    await watcher.close()


def test_without_a_running_loop_every_piece_goes_at_once() -> None:
    feed = LiveFeed()
    for piece in PIECES:
        feed.text("s", "t", 0, ANSWER, piece)
    assert feed.snapshot() == [TextDelta("s", "t", 0, ANSWER, 0, "".join(PIECES))]
