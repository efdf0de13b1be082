"""Markdown for an answer while it streams.

The words are written as they arrive (a slow model shows every word at
once); each time a markdown block is complete (a paragraph ended by a blank
line, a code block by its closing fence), the raw lines it took on the
terminal are erased and the block is printed rendered. What is still under
way stays raw until its block completes or the answer ends. Only a terminal
is redrawn: piped output keeps the raw text, which is already the answer.
A block taller than the screen stays raw too: its first rows have scrolled
out of reach, and a rendered copy below them would show it twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.console import Console
from rich.markdown import Markdown
from rich.segment import Segment, Segments
from rich.text import Text

# Text with any of these is rendered as markdown (else it is already right).
MARKDOWN_MARKS = ("`", "**", "# ", "| ", "- ", "* ", "](", "1. ")
FENCES = ("```", "~~~")


def has_markdown(text: str) -> bool:
    return any(mark in text for mark in MARKDOWN_MARKS)


def complete_blocks(text: str) -> int:
    """How many leading characters of `text` form complete markdown blocks:
    up to a blank line outside a code block, or through a code block's
    closing fence line. 0 while the first block is still under way (blank
    lines alone are no block: they go with the block that follows)."""
    end, offset, fence, content = 0, 0, None, False
    for line in text.splitlines(keepends=True):
        offset += len(line)
        if not line.endswith("\n"):
            break  # the line under way
        stripped = line.strip()
        opens = next((mark for mark in FENCES if stripped.startswith(mark)), None)
        if fence is not None:
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                fence, end, content = None, offset, False
        elif opens is not None:
            fence = opens
        elif not stripped:
            if content:
                end, content = offset, False
        else:
            content = True
    return end


def screen_rows(text: str, width: int) -> int:
    """The terminal rows `text` takes when written from a row's start, with
    the terminal wrapping at `width` (the cursor ends on the last row)."""
    rows, column = 1, 0
    for char in text:
        if char == "\n":
            rows, column = rows + 1, 0
            continue
        cells = cell_len(char)
        if column + cells > width:  # a wide character that does not fit wraps whole
            rows, column = rows + 1, 0
        column += cells
    return rows


@dataclass
class AnswerStream:
    """One streamed answer: what is written raw and not yet rendered."""

    console: Console
    prefix: str
    style: str
    # The raw text on screen that is not part of a finished block (the
    # prefix included until a block is finished).
    raw: str = ""
    # Whether the prefix stays on screen (a finished block kept it or a
    # rendered block printed it as a line of its own).
    headed: bool = False
    _pending: str = field(default="", repr=False)

    def start(self) -> None:
        self._print_raw(self.prefix)

    def write(self, delta: str) -> None:
        self._print_raw(delta)
        self._pending += delta
        done = complete_blocks(self._pending)
        if done and self.console.is_terminal:
            block, self._pending = self._pending[:done], self._pending[done:]
            self._finish(block)

    def end(self, render: bool = True) -> bool:
        """Render what is left (unless not `render`: it stays raw); True
        when the cursor is at a line's start."""
        if (
            render
            and self._pending.strip()
            and self.console.is_terminal
            and has_markdown(self._pending)
        ):
            block, self._pending, shown = self._pending, "", self.raw
            if self._finish(block):
                return True
            return not shown or shown.endswith("\n")
        return not self.raw or self.raw.endswith("\n")

    def _finish(self, block: str) -> bool:
        """Replace the block's raw rows with the block rendered, when it has
        any markdown (plain text is already shown as it should be) and its
        rows can all be erased; True when it was."""
        rest = self._pending
        if not has_markdown(block) or not self._reachable(self.raw):
            self.raw, self.headed = rest, True
            return False
        self._erase(self.raw)
        if not self.headed:
            self.console.print(Text(self.prefix.rstrip(), style=self.style))
            self.headed = True
        elif block.startswith("\n"):
            self.console.print()  # the blank line before the block
        self._print_rendered(block.strip("\n"))
        if block.endswith("\n\n"):
            self.console.print()  # the blank line that ended the block
        self.raw = ""
        self._print_raw(rest)
        return True

    def _print_rendered(self, block: str) -> None:
        """The block as markdown, without the blank rows rich pads code
        blocks and tables with (the blank lines of the answer space them)."""
        lines = self.console.render_lines(Markdown(block), pad=False, new_lines=False)
        while lines and _blank(lines[0]):
            lines.pop(0)
        while lines and _blank(lines[-1]):
            lines.pop()
        for line in lines:
            self.console.print(Segments([*line, Segment.line()]), end="", soft_wrap=True)

    def _print_raw(self, piece: str) -> None:
        if piece:
            self.console.print(Text(piece, style=self.style), end="", soft_wrap=True)
            self.console.file.flush()
            self.raw += piece

    def _reachable(self, shown: str) -> bool:
        """Whether the rows `shown` takes are all still on the screen (the
        cursor on the last of them), so they can be erased."""
        return screen_rows(shown, self.console.width) < self.console.height

    def _erase(self, shown: str) -> None:
        rows = screen_rows(shown, self.console.width)
        # To the first row's start, clearing each row on the way up.
        self.console.file.write("\r\x1b[2K" + "\x1b[1A\x1b[2K" * (rows - 1))
        self.console.file.flush()


def _blank(line: list[Segment]) -> bool:
    return not "".join(segment.text for segment in line).strip()
