"""Server-sent events (`text/event-stream`, as the WHATWG HTML standard
defines it) decoded from a response body's bytes as they arrive.

Only what a chat-completions stream carries is kept: each event's data, its
`data:` lines joined by newlines. Comments (`: keep-alive`) and the `event`,
`id` and `retry` fields are read and dropped; an event left unfinished when
the body ends is dropped, as the standard says.

The decoder is fed whatever one socket read returned, so a burst of chunks
costs one wake-up and a paced stream one per chunk. (httpx-sse decodes the
same format, but reads through httpx's stack of byte, text and line
iterators, which cost more per chunk than the chunk's own parse:
bench/RESULTS.md.)
"""

from __future__ import annotations

_CR = b"\r"
_LF = b"\n"
_LINE_ENDS = (_LF, _CR)


class EventDataDecoder:
    """Bytes in, the data of each completed event out."""

    def __init__(self) -> None:
        self._unended = b""  # the start of a line whose end has not arrived
        self._data: list[bytes] = []  # the data lines of the event being read
        # A CR ended the last block: an LF opening the next belongs to it.
        self._after_cr = False

    def feed(self, block: bytes) -> list[str]:
        """The data of every event `block` completes, in order."""
        if not block:
            return []  # nothing arrived: a CR that ended the last block still waits
        if self._after_cr and block.startswith(_LF):
            block = block[1:]
        self._after_cr = block.endswith(_CR)
        if not block:
            return []
        completed: list[str] = []
        lines = (self._unended + block).splitlines(keepends=True)
        self._unended = b"" if lines[-1].endswith(_LINE_ENDS) else lines.pop()
        for line in lines:
            self._line(line.rstrip(b"\r\n"), completed)
        return completed

    def _line(self, line: bytes, completed: list[str]) -> None:
        if not line:  # a blank line ends the event
            if self._data:
                completed.append(b"\n".join(self._data).decode("utf-8", errors="replace"))
                self._data = []
            return
        name, _, value = line.partition(b":")
        if name == b"data":
            self._data.append(value[1:] if value.startswith(b" ") else value)
