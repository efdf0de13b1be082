"""A streamed answer as a person sees it in the terminal: every word as it
arrives, and each finished markdown block redrawn rendered (no `**`, no
fences, a table with borders), long wrapped lines erased without a trace.
The terminal is a real emulator (pyte) fed the bytes the chat writes."""

from __future__ import annotations

import io

import pyte
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from clients.cli.live_markdown import AnswerStream, complete_blocks, screen_rows

WIDTH, HEIGHT = 40, 40

ANSWER = (
    "The fix is in **parse.py**: the loop ran one step too far, and this sentence is long "
    "enough to wrap over several rows.\n"
    "\n"
    "```python\n"
    "for item in items:\n"
    "    handle(item)\n"
    "```\n"
    "| file | change |\n"
    "|------|--------|\n"
    "| parse.py | loop bound |\n"
)


class Terminal:
    def __init__(self, height: int = HEIGHT) -> None:
        # The rows that scroll off the top are kept, as a terminal's scrollback.
        self.screen = pyte.HistoryScreen(WIDTH, height, history=1000)
        self.stream = pyte.Stream(self.screen)
        self.file = io.StringIO()
        self.console = Console(
            file=self.file, force_terminal=True, width=WIDTH, height=height, color_system=None
        )

    def shown(self) -> list[str]:
        # The tty turns each newline into CR LF (onlcr) before the terminal sees it.
        self.stream.feed(self.file.getvalue().replace("\n", "\r\n"))
        self.file.seek(0)
        self.file.truncate()
        return [line.rstrip() for line in self.screen.display if line.strip()]

    def scrollback(self) -> list[str]:
        """Every row written, the scrolled-off ones first."""
        self.shown()
        rows = [
            "".join(row[x].data for x in range(WIDTH)).rstrip() for row in self.screen.history.top
        ]
        return [row for row in rows + self.shown() if row]


def stream_answer(terminal: Terminal, text: str, piece: int = 3) -> AnswerStream:
    answer = AnswerStream(terminal.console, "assistant: ", "cyan")
    answer.start()
    for start in range(0, len(text), piece):
        answer.write(text[start : start + piece])
    return answer


def test_a_word_under_way_is_shown_before_its_block_is_finished() -> None:
    terminal = Terminal()
    stream_answer(terminal, "The fix is in **par")
    assert terminal.shown() == ["assistant: The fix is in **par"]


def test_finished_blocks_are_rendered_and_their_raw_rows_erased() -> None:
    terminal = Terminal()
    answer = stream_answer(terminal, ANSWER)
    assert answer.end()
    shown = terminal.shown()
    screen = "\n".join(shown)
    assert shown[0] == "assistant:"
    assert "**" not in screen and "```" not in screen and "|---" not in screen
    assert "The fix is in parse.py: the loop ran" in screen
    assert "for item in items:" in screen and "    handle(item)" in screen
    assert any("parse.py" in line and "loop bound" in line for line in shown)
    assert any(set(line) & set("─━┃│") for line in shown), "the table has its borders"
    # Blocks keep the answer's spacing: one blank row where it had a blank line.
    rows = [line.rstrip() for line in terminal.screen.display]
    assert rows[4] == "" and rows[5].strip() == "for item in items:"
    # Every raw row is gone: the prefix shows once, the sentence's words once.
    assert screen.count("assistant") == 1 and screen.count("several") == 1


def test_plain_text_is_left_as_it_streamed() -> None:
    terminal = Terminal()
    answer = stream_answer(terminal, "Echo: hello\n\nand a second paragraph")
    answer.end()
    assert terminal.shown() == ["assistant: Echo: hello", "and a second paragraph"]


def test_output_that_is_not_a_terminal_keeps_the_raw_text() -> None:
    file = io.StringIO()
    answer = AnswerStream(Console(file=file, width=WIDTH), "assistant: ", "")
    answer.start()
    answer.write(ANSWER)
    answer.end()
    assert file.getvalue() == "assistant: " + ANSWER


def test_a_code_block_is_finished_only_by_its_closing_fence() -> None:
    assert complete_blocks("```\na\n\nb\n") == 0
    text = "```\na\n\nb\n```\n"
    assert complete_blocks(text + "more") == len(text)
    assert complete_blocks("para\n\nnext") == len("para\n\n")
    # Blank lines alone are no block: they go with the one that follows.
    assert complete_blocks("```\na\n```\n\n") == len("```\na\n```\n")
    assert complete_blocks("\n\npara") == 0


@given(st.text(alphabet="ab \n", max_size=120), st.integers(5, 50))
def test_rows_are_counted_as_the_terminal_wraps_them(text: str, width: int) -> None:
    screen = pyte.Screen(width, 200)
    pyte.Stream(screen).feed(text.replace("\n", "\r\n"))
    assert screen_rows(text, width) == screen.cursor.y + 1


def test_a_wide_character_that_does_not_fit_wraps_whole() -> None:
    assert screen_rows("a界界界", 6) == 2  # 1 + 2 + 2 cells, the third needs a new row


def test_an_answer_cut_by_another_line_leaves_its_block_under_way_raw() -> None:
    terminal = Terminal()
    answer = stream_answer(terminal, "Here:\n\n```python\ndef f():\n")
    answer.end(render=False)  # a line is said in the middle of the answer
    assert terminal.shown()[-2:] == ["```python", "def f():"]


def test_a_block_taller_than_the_screen_stays_raw_and_shows_once() -> None:
    # Its first rows scroll out of reach of the cursor: erasing them is not
    # possible, and a rendered copy below would show the list twice.
    terminal = Terminal(height=10)
    items = "".join(f"- item {n} with `code`\n" for n in range(15))
    answer = stream_answer(terminal, f"A list:\n\n{items}\nThe **end**.")
    assert answer.end()
    rows = terminal.scrollback()
    for n in range(15):
        assert sum(f"item {n} with" in row for row in rows) == 1, rows
    # The blocks that fit are still rendered.
    assert rows[0] == "assistant: A list:" and rows[-1] == "The end.", rows
