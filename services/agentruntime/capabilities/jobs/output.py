"""What a background job wrote, read by byte offset.

Offsets count every byte the job ever wrote, so a reader goes on from the
offset the last read gave back, whatever came meanwhile. Only the latest
`kept` bytes are held: a read from an offset older than that starts at the
oldest byte still held, and says how many it skipped. A read never cuts a
UTF-8 character: it starts after a cut one and ends before one, and the
offset it gives back is where the next character starts.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ...shell import trim_utf8_end, trim_utf8_start

KEPT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Chunk:
    text: str
    # The offsets of its first byte and of the byte after its last.
    start: int
    end: int
    # Bytes before `start` that were asked for but are no longer held.
    skipped: int
    # Every byte written so far.
    total: int


class JobOutput:
    """A command's output sink (shell.OutputSink): held, counted, awaited."""

    def __init__(self, kept: int = KEPT_BYTES) -> None:
        self._kept = kept
        self._data = bytearray()
        # The offset of _data[0].
        self._first = 0
        self.closed = False
        self._grown = asyncio.Event()

    @property
    def total(self) -> int:
        return self._first + len(self._data)

    def feed(self, data: bytes) -> None:
        self._data += data
        over = len(self._data) - self._kept
        if over > 0:
            del self._data[:over]
            self._first += over
        self._grown.set()

    def close(self) -> None:
        self.closed = True
        self._grown.set()

    def read(self, offset: int, limit: int) -> Chunk:
        """At most `limit` bytes from `offset` (at least one character when
        there is one, however wide)."""
        start = min(max(offset, self._first), self.total)
        skipped = start - offset if offset < self._first else 0
        raw = bytes(self._data[start - self._first : start - self._first + max(limit, 4)])
        head = trim_utf8_start(raw)
        start += len(raw) - len(head)
        room = head[:limit]
        # A character cut at the very end of a closed output never completes.
        ended = self.closed and start + len(room) == self.total
        body = room if ended else trim_utf8_end(room)
        if not body and head:  # `limit` is narrower than the next character
            body = trim_utf8_end(head) or (head if self.closed else b"")
        return Chunk(body.decode("utf-8", "replace"), start, start + len(body), skipped, self.total)

    def tail(self, limit: int) -> str:
        """The last `limit` bytes or fewer, from a line's start when one is in them."""
        raw = trim_utf8_start(bytes(self._data[-limit:]))
        text = raw.decode("utf-8", "replace")
        if len(self._data) > limit and "\n" in text:
            text = text.split("\n", 1)[1]
        return text

    async def grown(self) -> None:
        """Wait for more output (or its end)."""
        self._grown.clear()
        await self._grown.wait()
