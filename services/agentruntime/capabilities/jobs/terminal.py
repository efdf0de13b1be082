"""A terminal: a program (the user's shell by default) on a pseudo-terminal,
in the same sandbox as a command of its session (confinement.prepare: the
file system view, the hidden paths, the network setting, the process
limit), kept running between calls so an interactive program (a REPL, a
tool asking y/n) can be driven.

The pty's output is rendered by pyte, a terminal emulator: what is read is
the screen as a person would see it (and the lines scrolled off it), never
the raw escape sequences. Typing waits for the output to settle (nothing new
for a moment), or for a pattern to show in what the terminal printed since
the text was typed, within a timeout.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import signal
import struct
import termios
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agenthost_core.folds import TERMINAL

from ...confinement import Jail, Prepared, prepare
from ...shell import KILL_GRACE_S, NotStarted, shell_environment, shell_program, signal_group
from .live import Job

if TYPE_CHECKING:
    import pyte

SETSID = "/usr/bin/setsid"
COLUMNS, ROWS = 120, 32
# Lines kept above the screen, and lines of what was printed since a send.
SCROLLBACK = 1000
SINCE_ROWS = 500
# Quiet this long and the output counts as settled.
SETTLE_S = 0.5
READ_BYTES = 65536
TERM = "xterm-256color"


@dataclass(frozen=True)
class Sent:
    """How a send ended: the pattern showed, the output settled, the program
    exited, or the timeout passed first."""

    matched: bool = False
    settled: bool = False
    exited: bool = False
    timed_out: bool = False


class Terminal(Job):
    kind = TERMINAL

    def __init__(
        self,
        job_id: str,
        command: str,
        jail: Jail | None,
        process: asyncio.subprocess.Process,
        master: int,
        prepared: Prepared | None,
        size: tuple[int, int],
    ) -> None:
        super().__init__(job_id, command, jail)
        self._process = process
        self._master = master
        self._prepared = prepared
        self.columns, self.rows = size
        # pyte loads with the first terminal, not with the runtime.
        import pyte

        from .screen import Screen

        self.screen = Screen(self.columns, self.rows, master, SCROLLBACK)
        self._stream = pyte.ByteStream(self.screen)
        self._since = pyte.Screen(self.columns, SINCE_ROWS)
        self._since_stream = pyte.ByteStream(self._since)
        self._bytes = 0
        self._last_output = time.monotonic()
        self._changed = asyncio.Event()
        self._eof = asyncio.Event()
        asyncio.get_running_loop().add_reader(master, self._readable)

    @classmethod
    async def open(
        cls,
        job_id: str,
        command: str,
        cwd: Path,
        jail: Jail | None,
        size: tuple[int, int] = (COLUMNS, ROWS),
    ) -> Terminal | NotStarted:
        """Start `command` (empty: the user's shell) on a new pty."""
        shell = shell_program()
        user_shell = os.environ.get("SHELL", "")
        if not command and user_shell and os.access(user_shell, os.X_OK):
            shell = user_shell
        program = [shell, "-c", command] if command else [shell]
        prepared = prepare(jail, program) if jail is not None else None
        if prepared is not None and prepared.refused is not None:
            return NotStarted(refused=prepared.refused.refusal())
        argv = prepared.argv if prepared is not None else program
        master, follower = os.openpty()
        columns, rows = size
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        os.set_blocking(master, False)
        env = {**shell_environment(), "TERM": TERM, "COLUMNS": str(columns), "LINES": str(rows)}
        try:
            # setsid --ctty: a session of its own whose controlling terminal
            # is the pty (job control, ^C); it execs, so bubblewrap's parent
            # is this runtime and --die-with-parent holds.
            process = await asyncio.create_subprocess_exec(
                SETSID,
                "--ctty",
                *argv,
                stdin=follower,
                stdout=follower,
                stderr=follower,
                cwd=cwd,
                env=env,
            )
        except OSError as error:
            os.close(master)
            if prepared is not None:
                await prepared.cleanup()
            return NotStarted(reason=f"cannot open the terminal: {error}")
        finally:
            os.close(follower)
        return cls(job_id, command, jail, process, master, prepared, size)

    # -- output ---------------------------------------------------------------------

    def _readable(self) -> None:
        try:
            data = os.read(self._master, READ_BYTES)
        except BlockingIOError:
            return
        except OSError:  # EIO: every process holding the pty is gone
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self._master)
            self._eof.set()
            self._changed.set()
            return
        self._bytes += len(data)
        self._last_output = time.monotonic()
        self._stream.feed(data)
        self._since_stream.feed(data)
        self._changed.set()

    @property
    def output_bytes(self) -> int:
        return self._bytes

    def output_tail(self, limit: int) -> str:
        return self.text()[-limit:]

    def text(self, scrollback: int = 0) -> str:
        """The screen (and up to `scrollback` lines above it), trailing
        blanks left out."""
        above = list(self.screen.history.top)[-scrollback:] if scrollback > 0 else []
        lines = [_line(row, self.columns) for row in above]
        lines += [line.rstrip() for line in self.screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)

    def cursor(self) -> tuple[int, int]:
        """(line, column) of the cursor, from 1."""
        return self.screen.cursor.y + 1, self.screen.cursor.x + 1

    def _since_text(self) -> str:
        return "\n".join(line.rstrip() for line in self._since.display)

    # -- typing ---------------------------------------------------------------------

    async def send(self, text: str, pattern: re.Pattern[str] | None, timeout_s: float) -> Sent:
        """Type `text`, then wait for `pattern` in what it prints from now
        on (None: for the output to settle), at most `timeout_s`."""
        self._since.reset()
        if self.running and not self._eof.is_set():
            await self._write(text.encode())
        return await self.wait(pattern, timeout_s)

    async def wait(
        self, pattern: re.Pattern[str] | None, timeout_s: float, *, first_output: bool = False
    ) -> Sent:
        """Wait for `pattern` in what was printed since the last send, or
        (None) for the output to settle; with `first_output`, it settles
        only once something was printed (a program starting)."""
        started = time.monotonic()
        deadline = started + timeout_s
        printed = self._bytes
        while True:
            if pattern is not None and pattern.search(self._since_text()):
                return Sent(matched=True)
            if self._eof.is_set():
                return Sent(exited=True)
            now = time.monotonic()
            quiet_until = max(self._last_output, started) + SETTLE_S
            silent = first_output and self._bytes == printed
            if pattern is None and now >= quiet_until and not silent:
                return Sent(settled=True)
            if now >= deadline:
                return Sent(timed_out=True)
            wake = deadline if pattern is not None or silent else min(deadline, quiet_until)
            self._changed.clear()
            try:
                async with asyncio.timeout(wake - now):
                    await self._changed.wait()
            except TimeoutError:
                pass

    async def _write(self, data: bytes) -> None:
        while data:
            try:
                written = os.write(self._master, data)
            except BlockingIOError:
                await asyncio.sleep(0.01)  # the pty's buffer is full: let the program read
                continue
            except OSError:
                return  # the program is gone
            data = data[written:]

    # -- ending ---------------------------------------------------------------------

    async def exited(self) -> tuple[int | None, int | None]:
        code = await self._process.wait()
        try:
            async with asyncio.timeout(KILL_GRACE_S):
                await self._eof.wait()  # what it printed last is read
        except TimeoutError:
            pass
        # Whatever it left in its session goes too.
        signal_group(self._process.pid, signal.SIGKILL)
        if not self._eof.is_set():
            asyncio.get_running_loop().remove_reader(self._master)
            self._eof.set()
        os.close(self._master)
        if self._prepared is not None:
            self._prepared.cleanup_soon()
        return (code, None) if code >= 0 else (None, -code)

    async def terminate(self) -> None:
        """SIGHUP and SIGTERM to its session's group (a shell ignores TERM
        but not HUP), SIGKILL after a grace."""
        pid = self._process.pid
        signal_group(pid, signal.SIGHUP)
        signal_group(pid, signal.SIGTERM)
        try:
            async with asyncio.timeout(KILL_GRACE_S):
                await self._process.wait()
        except TimeoutError:
            signal_group(pid, signal.SIGKILL)


def _line(row: dict[int, pyte.screens.Char], columns: int) -> str:
    return "".join(row[x].data for x in range(columns)).rstrip()
