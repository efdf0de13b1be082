"""The shell tool: run one command in the session's folder and tell the model
what happened.

* The command runs under ``/bin/bash -c`` (``/bin/sh`` when bash is absent), with
  stdin from /dev/null (a command waiting for input would hang the turn) and
  stderr merged into stdout (the model reads one stream, in order). A caller
  that has something to say to it (a hook's event, as JSON) gives ``stdin``,
  and may keep its stderr apart (``errors_apart``: a hook's stderr is its
  message).
* It runs in its own process group (a new session). When the command ends,
  times out or the call is cancelled, the whole group gets SIGTERM, then SIGKILL
  after a short grace: nothing it started outlives the call, background jobs
  (``server &``) included. A process that leaves the group itself (``setsid``)
  is out of reach; we stop waiting for its output after the grace.
* Output is capped: the result keeps the first and the last half of the cap with
  a marker line in between, because errors tend to be at the end and context at
  the start. ``on_output`` streams the first ``output_cap`` bytes as they arrive
  (decoded incrementally) and is then no longer called.
* The command's environment is the runtime's minus its secrets, since whatever a
  command can read, the model (and anything it prints to) can read too.
* Given a ``Jail`` (confinement.py), the command runs inside bubblewrap: the
  sandbox's file system view, no network unless allowed, a bounded number of
  processes. Where that is impossible it does not run at all (``refused``).
* ``start_command`` starts a command the same way and leaves it running,
  its output fed to a sink of the caller's: a background job
  (capabilities/jobs/) is one.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .confinement import Jail, Prepared, confined, prepare
from .tools import ToolContext, ToolOutcome

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 600.0
DEFAULT_OUTPUT_CAP = 64 * 1024
KILL_GRACE_S = 2.0
CANNOT_START = 126  # the shell's own code for "found but cannot execute"
BASH = "/bin/bash"
SH = "/bin/sh"
SECRET_PREFIXES = ("AGENTHOST_",)
SECRET_MARKERS = ("API_KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")

_log = logging.getLogger(__name__)
_stopping: set[asyncio.Future[None]] = set()

SHELL_DESCRIPTION = (
    "Run a bash command in the session folder (stdin is empty; stdout and stderr are "
    "combined; background processes are stopped when the command ends: to keep one "
    "running, such as a dev server or a watch build, use background: true)."
)
SHELL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The bash command line to run."},
        "timeout_s": {
            "type": "number",
            "minimum": 1,
            "maximum": MAX_TIMEOUT_S,
            "description": "Seconds before the command is killed (default 120, at most 600; "
            "not for a background job).",
        },
        "background": {
            "type": "boolean",
            "description": "Start it as a background job: the call answers its id at once "
            "(job_output, job_wait, job_kill; you are told when it ends).",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class ShellResult:
    exit_code: int | None  # None when it was killed (timeout / cancel)
    output: str  # combined stdout+stderr, capped
    timed_out: bool
    truncated: bool  # output was capped
    duration_s: float
    # Why the command was not run at all (it could not be confined).
    refused: str = ""
    # Its stderr, capped, when kept apart from `output`.
    errors: str = ""


def shell_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for commands: base (default os.environ) minus secrets."""
    source = os.environ if base is None else base
    return {name: value for name, value in source.items() if not _is_secret(name)}


def _is_secret(name: str) -> bool:
    upper = name.upper()
    return upper.startswith(SECRET_PREFIXES) or any(mark in upper for mark in SECRET_MARKERS)


def _shell_program() -> str:
    return BASH if os.access(BASH, os.X_OK) else SH


def shell_program() -> str:
    """The shell commands run under (bash, else sh)."""
    return _shell_program()


def jail_for(context: ToolContext) -> Jail | None:
    """The jail of a command of this call's session (None: the user chose
    the full sandbox, unconfined): what every command, job and terminal
    of the session gets."""
    if not confined(context.sandbox):
        return None
    return Jail(context.sandbox, context.cwd, context.network, context.hidden)


# --- output -----------------------------------------------------------------------------


def trim_utf8_end(data: bytes) -> bytes:
    """data without an incomplete UTF-8 character at its end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # a lead byte or ASCII
            width = 1 if byte < 0xC0 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data[:-back] if width > back else data
    return data


def trim_utf8_start(data: bytes) -> bytes:
    """data without the continuation bytes of a character cut at its start."""
    skip = 0
    while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
        skip += 1
    return data[skip:]


class _Stream:
    """Feeds on_output with the first `budget` bytes, decoded incrementally."""

    def __init__(self, on_output: Callable[[str], None], budget: int) -> None:
        self._on_output: Callable[[str], None] | None = on_output
        self._budget = budget
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> None:
        taken = data[: self._budget]
        self._budget -= len(taken)
        self._emit(self._decoder.decode(taken, final=False))

    def close(self) -> None:
        if self._budget > 0:  # not capped: flush a character cut at the end
            self._emit(self._decoder.decode(b"", final=True))

    def _emit(self, text: str) -> None:
        if not text or self._on_output is None:
            return
        try:
            self._on_output(text)
        except Exception:
            _log.exception("on_output failed; streaming stopped")
            self._on_output = None


class _Capture:
    """The first `cap` bytes and the latest bytes after them, for head + tail."""

    def __init__(self, cap: int, on_output: Callable[[str], None] | None) -> None:
        self._cap, self._keep = cap, cap - cap // 2
        self._head, self._tail = bytearray(), bytearray()
        self._total = 0
        self._stream = _Stream(on_output, cap) if on_output is not None else None

    def feed(self, data: bytes) -> None:
        self._total += len(data)
        room = self._cap - len(self._head)
        self._head += data[:room]
        self._tail += data[room:]
        if len(self._tail) > 2 * self._keep:
            del self._tail[: -self._keep]
        if self._stream is not None:
            self._stream.feed(data)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()

    @property
    def truncated(self) -> bool:
        return self._total > self._cap

    def text(self) -> str:
        if not self.truncated:
            return self._head.decode("utf-8", "replace")
        head = trim_utf8_end(bytes(self._head[: self._cap // 2]))
        tail = trim_utf8_start(bytes((self._head[self._cap // 2 :] + self._tail)[-self._keep :]))
        start = head.decode("utf-8", "replace")
        newline = "" if not start or start.endswith("\n") else "\n"
        omitted = self._total - len(head) - len(tail)
        return f"{start}{newline}[… {omitted} bytes omitted …]\n{tail.decode('utf-8', 'replace')}"


class OutputSink(Protocol):
    """Where a command's output goes, as it comes."""

    def feed(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class _ShellProtocol(asyncio.SubprocessProtocol):
    """Collects the output (and stderr, when kept apart) and tells when the
    shell exited and when the output closed (later, when a background
    process still holds it)."""

    def __init__(self, sink: OutputSink, errors: OutputSink | None = None) -> None:
        self.sink = sink
        self.errors = errors
        # The output pipes still open (stdin's closing is none of them).
        self._open = {1, 2} if errors is not None else {1}
        self.exited = asyncio.Event()
        self.output_closed = asyncio.Event()

    def _of(self, fd: int) -> OutputSink:
        return self.errors if fd == 2 and self.errors is not None else self.sink

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        self._of(fd).feed(bytes(data))

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd not in self._open:
            return
        self._open.discard(fd)
        self._of(fd).close()
        if not self._open:
            self.output_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


# --- processes --------------------------------------------------------------------------


def signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(pgid, signum)


async def _within(seconds: float, *events: asyncio.Event) -> bool:
    """Whether every event is set within seconds."""
    try:
        async with asyncio.timeout(seconds):
            for event in events:
                await event.wait()
    except TimeoutError:
        return False
    return True


async def _stop_group(transport: asyncio.SubprocessTransport, protocol: _ShellProtocol) -> None:
    """SIGTERM the group, SIGKILL what is left after the grace, then close."""
    pgid, events = transport.get_pid(), (protocol.exited, protocol.output_closed)
    signal_group(pgid, signal.SIGTERM)
    settled = await _within(KILL_GRACE_S, *events)
    signal_group(pgid, signal.SIGKILL)  # also members that closed their output
    if not settled:
        await _within(KILL_GRACE_S, *events)
    transport.close()  # stops reading output held open by a process outside the group


async def _stop_shielded(transport: asyncio.SubprocessTransport, protocol: _ShellProtocol) -> None:
    """Stop the group even when the caller is cancelled again meanwhile."""
    stopping = asyncio.ensure_future(_stop_group(transport, protocol))
    _stopping.add(stopping)
    stopping.add_done_callback(_stopping.discard)
    await asyncio.shield(stopping)


def _exit_code(returncode: int | None) -> int | None:
    """The exit code a shell would report (128 + N for a death by signal N)."""
    if returncode is None or returncode >= 0:
        return returncode
    return 128 - returncode


async def _spawn(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str] | None,
    protocol: _ShellProtocol,
    stdin: bytes | None = None,
) -> asyncio.SubprocessTransport:
    transport, _ = await asyncio.get_running_loop().subprocess_exec(
        lambda: protocol,
        *argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if protocol.errors is None else subprocess.PIPE,
        start_new_session=True,
        env=shell_environment() if env is None else dict(env),
    )
    if stdin is not None:
        # Written as the command reads it, then closed (its end of input); a
        # command that exits unread leaves the rest unwritten.
        pipe = transport.get_pipe_transport(0)
        if isinstance(pipe, asyncio.WriteTransport):
            pipe.write(stdin)
            pipe.close()
    return transport


@dataclass(frozen=True)
class NotStarted:
    """Why a command did not start: it could not be confined (`refused`),
    or could not be started (exit code 126 and the reason)."""

    refused: str = ""
    reason: str = ""


class StartedCommand:
    """A command running in its own process group (in bubblewrap when it was
    given a jail), its output going to its sink."""

    def __init__(
        self,
        transport: asyncio.SubprocessTransport,
        protocol: _ShellProtocol,
        prepared: Prepared | None,
    ) -> None:
        self._transport = transport
        self._protocol = protocol
        self._prepared = prepared

    @property
    def exited(self) -> asyncio.Event:
        """Set once the command's shell (or bubblewrap) exited."""
        return self._protocol.exited

    @property
    def pid(self) -> int:
        return self._transport.get_pid()

    @property
    def returncode(self) -> int | None:
        """Its exit status, -N when signal N ended it (None: running)."""
        return self._transport.get_returncode()

    async def stop(self) -> None:
        """SIGTERM its group, SIGKILL what is left after a grace, stop
        reading its output; done even when the caller is cancelled again
        meanwhile."""
        await _stop_shielded(self._transport, self._protocol)

    def cleanup_soon(self) -> None:
        """Remove its process limit's cgroup once it is empty (root)."""
        if self._prepared is not None:
            self._prepared.cleanup_soon()


async def start_command(
    command: str,
    cwd: Path,
    sink: OutputSink,
    *,
    env: Mapping[str, str] | None = None,
    jail: Jail | None = None,
    stdin: bytes | None = None,
    errors: OutputSink | None = None,
) -> StartedCommand | NotStarted:
    """Start command in cwd (confined by `jail` when given), stdin empty (or
    `stdin`), stdout and stderr to `sink` (stderr to `errors` when given),
    in a process group of its own."""
    if "\0" in command:
        return NotStarted(reason=_cannot_start("the command contains a NUL byte"))
    program = [_shell_program(), "-c", command]
    prepared = prepare(jail, program) if jail is not None else None
    if prepared is not None and prepared.refused is not None:
        return NotStarted(refused=prepared.refused.refusal())
    protocol = _ShellProtocol(sink, errors)
    try:
        argv = prepared.argv if prepared is not None else program
        transport = await _spawn(argv, cwd, env, protocol, stdin)
    except OSError as error:
        if prepared is not None:
            await prepared.cleanup()
        return NotStarted(reason=_cannot_start(str(error)))
    return StartedCommand(transport, protocol, prepared)


async def run_shell(
    command: str,
    cwd: Path,
    *,
    timeout_s: float,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    on_output: Callable[[str], None] | None = None,
    env: Mapping[str, str] | None = None,
    jail: Jail | None = None,
    stdin: bytes | None = None,
    errors_apart: bool = False,
) -> ShellResult:
    """Run command in cwd (confined by `jail` when given); see the module
    docstring. A command that cannot start (missing cwd, NUL byte) answers
    exit code 126 with the reason as output."""
    started = time.monotonic()
    capture = _Capture(max(output_cap, 2), on_output)
    errors = _Capture(max(output_cap, 2), None) if errors_apart else None
    running = await start_command(
        command, cwd, capture, env=env, jail=jail, stdin=stdin, errors=errors
    )
    if isinstance(running, NotStarted):
        if running.refused:
            return ShellResult(None, "", False, False, 0.0, running.refused)
        return ShellResult(CANNOT_START, running.reason, False, False, 0.0)
    try:
        try:
            finished = await _within(timeout_s, running.exited)
        except asyncio.CancelledError:
            await running.stop()
            raise
        await running.stop()
    finally:
        running.cleanup_soon()
    code = _exit_code(running.returncode) if finished else None
    duration = time.monotonic() - started
    said = errors.text() if errors is not None else ""
    return ShellResult(code, capture.text(), not finished, capture.truncated, duration, errors=said)


def _cannot_start(why: str) -> str:
    return f"cannot start the command: {why}"


def format_shell_result(command: str, result: ShellResult) -> ToolOutcome:
    """The text the model reads: a status line, then the output; ok only on exit 0."""
    if result.refused:
        return ToolOutcome(ok=False, error=result.refused)
    if result.timed_out:
        status = (
            f"timed out after {result.duration_s:.1f} s; the command and everything it "
            f"started were killed: {_short(command)}"
        )
    elif result.exit_code is None:
        status = "killed"
    else:
        status = f"exit code {result.exit_code}"
    text = f"{status}\n{result.output}" if result.output else f"{status}\n(no output)"
    if result.exit_code == 0 and not result.timed_out:
        return ToolOutcome(ok=True, output=text)
    return ToolOutcome(ok=False, error=text)


def _short(command: str, limit: int = 200) -> str:
    line = " ".join(command.split())
    return line if len(line) <= limit else line[:limit] + "…"
