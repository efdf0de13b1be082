"""A terminal's screen (pyte), apart from terminal.py so that pyte loads
with the first terminal a session opens, not with the runtime."""

from __future__ import annotations

import contextlib
import os

import pyte


class Screen(pyte.HistoryScreen):
    """The terminal's screen; it answers the program's queries (where is
    the cursor?) as a terminal would, so a program that asks never hangs."""

    def __init__(self, columns: int, lines: int, reply: int, scrollback: int) -> None:
        super().__init__(columns, lines, history=scrollback, ratio=0.5)
        self._reply = reply

    def write_process_input(self, data: str) -> None:
        with contextlib.suppress(OSError):  # the program is gone
            os.write(self._reply, data.encode())
