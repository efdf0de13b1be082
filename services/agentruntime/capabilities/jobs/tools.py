"""The tools of background jobs and terminals, and what they tell the model.

Starting a job is `shell` with background: true (its approval and sandbox
are the command's); job_output, job_wait and job_kill read, wait for and
stop one. terminal_open and terminal_send are commands for the sandbox and
the approval policy, as `shell` is; terminal_read and terminal_close are not.
Every answer is bounded: output by offset and limit, a terminal by its
screen and a few lines above it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import BACKGROUND, TERMINAL, Approval, one_line

from ...confinement import Jail
from ...gates import READ_ONLY, WORKSPACE_WRITE, Effect
from ...shell import MAX_TIMEOUT_S, NotStarted, jail_for
from ...tools import Args, Tool, ToolContext, ToolDisplay, ToolOutcome
from .background import BackgroundJob
from .live import Job, JobNotStarted, LiveJobs
from .terminal import Sent, Terminal

DEFAULT_READ_BYTES = 16 * 1024
MAX_READ_BYTES = 64 * 1024
WAIT_TAIL_BYTES = 4 * 1024
DEFAULT_WAIT_S = 60.0
DEFAULT_SEND_TIMEOUT_S = 10.0
MAX_SEND_TIMEOUT_S = 120.0
OPEN_SETTLE_S = 5.0
MAX_SCROLLBACK = 200
# Tools whose result tells the model how its job stands (a notice of its
# end is then owed no more), by the argument naming the job.
JOB_TOOLS = {
    "job_output": "job_id",
    "job_wait": "job_id",
    "job_kill": "job_id",
    "terminal_send": "terminal_id",
    "terminal_read": "terminal_id",
    "terminal_close": "terminal_id",
}
KILLED_BY_MODEL = "stopped by the model"
NOT_HERE = (
    "no {what} {id} runs here (it ended before this runtime started, or never was; "
    "/jobs lists them)"
)

# Starts a job of the call's session: its kind, and how to spawn it given its id.
Spawn = Callable[[str], Awaitable[Job | NotStarted]]
Launch = Callable[[ToolContext, str, Spawn], Awaitable[Job]]


# -- what is said -----------------------------------------------------------------------


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def how_it_ended(ended: ev.JobEnded) -> str:
    """ "exited with code 0", "was killed (signal 15): stopped by the model",
    "was stopped: the runtime stopped", "was lost: ..."."""
    if ended.reason == ev.JOB_END_REASON_LOST:
        said = "was lost"
    elif ended.reason == ev.JOB_END_REASON_CLOSED:
        said = "was stopped"
    elif ended.reason == ev.JOB_END_REASON_KILLED and ended.HasField("signal"):
        said = f"was killed (signal {ended.signal})"
    elif ended.reason == ev.JOB_END_REASON_KILLED:
        said = "was killed"
    elif ended.HasField("exit_code"):
        return f"exited with code {ended.exit_code}"
    elif ended.HasField("signal"):
        return f"was ended by signal {ended.signal}"
    else:
        return "ended"
    return f"{said}: {ended.message}" if ended.message else said


def status(job: Job) -> str:
    name = "Terminal" if job.kind == TERMINAL else "Job"
    if job.end is None:
        return (
            f"{name} {job.job_id} is running ({duration(job.seconds)}, "
            f"{job.output_bytes} bytes of output): $ {_short(job.command)}"
        )
    return f"{name} {job.job_id} {how_it_ended(job.end)} after {duration(job.seconds)}"


def _short(command: str) -> str:
    return one_line(command, 200) if command else "(the user's shell)"


def _failed(error: str, summary: str) -> ToolOutcome:
    return ToolOutcome(ok=False, error=error, display=ToolDisplay(summary=summary))


def _ended_badly(job: Job) -> bool:
    end = job.end
    return end is not None and not (end.HasField("exit_code") and end.exit_code == 0)


# -- arguments ----------------------------------------------------------------------------


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_STRING = {"type": "string"}
_WHOLE = {"type": "integer", "minimum": 0}
_NUMBER = {"type": "number", "minimum": 0}


def _number(args: Args, name: str, default: float, low: float, high: float) -> float | str:
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        return f"{name} must be a number from {low:g} to {high:g}"
    return float(value)


def _whole(args: Args, name: str, default: int, low: int, high: int) -> int | str:
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return f"{name} must be a whole number from {low} to {high}"
    return value


# -- background jobs ----------------------------------------------------------------------


class JobTools:
    """The tools over the jobs of this runtime."""

    def __init__(self, live: LiveJobs, launch: Launch) -> None:
        self._live = live
        self._launch = launch

    def _job(self, context: ToolContext, args: Args, key: str, what: str) -> Job | ToolOutcome:
        job_id = args.get(key)
        if not isinstance(job_id, str) or not job_id:
            return ToolOutcome(ok=False, error=f"{key} must be a {what}'s id")
        job = self._live.find(context.session_id, job_id)
        if job is None or (what == "terminal") != (job.kind == TERMINAL):
            return ToolOutcome(ok=False, error=NOT_HERE.format(what=what, id=job_id))
        return job

    # -- starting -------------------------------------------------------------------

    async def start_background(self, context: ToolContext, args: Args) -> ToolOutcome:
        """`shell` with background: true."""
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return ToolOutcome(ok=False, error="command must be a non-empty string")
        jail = jail_for(context)

        async def start(job_id: str) -> Job | NotStarted:
            return await BackgroundJob.start(job_id, command, context.cwd, jail)

        try:
            job = await self._launch(context, BACKGROUND, start)
        except JobNotStarted as refused:
            return _failed(refused.why, f"$ {command} (not started)")
        text = (
            f"Started {job.job_id} in the background: $ {_short(command)}\n"
            f'job_output reads what it writes (job_id "{job.job_id}"), job_wait waits for it '
            "to end, job_kill stops it; you will be told when it ends."
        )
        return ToolOutcome(ok=True, output=text, display=ToolDisplay(f"$ {command} ({job.job_id})"))

    # -- reading, waiting, stopping -------------------------------------------------------

    async def output(self, context: ToolContext, args: Args) -> ToolOutcome:
        found = self._job(context, args, "job_id", "job")
        if isinstance(found, ToolOutcome):
            return found
        offset = _whole(args, "offset", 0, 0, 2**62)
        limit = _whole(args, "limit", DEFAULT_READ_BYTES, 1, MAX_READ_BYTES)
        if isinstance(offset, str) or isinstance(limit, str):
            return ToolOutcome(ok=False, error=offset if isinstance(offset, str) else str(limit))
        assert isinstance(found, BackgroundJob)
        chunk = found.output.read(offset, limit)
        lines = [status(found)]
        if chunk.skipped:
            lines.append(
                f"(the {chunk.skipped} bytes before offset {chunk.start} are no longer held)"
            )
        more = "" if chunk.end >= chunk.total else "; there is more"
        lines.append(
            f"Output bytes {chunk.start}-{chunk.end} of {chunk.total} "
            f"(next offset {chunk.end}{more}):"
        )
        lines.append(chunk.text if chunk.text else "(no output there yet)")
        summary = f"job_output {found.job_id} @{chunk.start} ({chunk.end - chunk.start} bytes)"
        return ToolOutcome(ok=True, output="\n".join(lines), display=ToolDisplay(summary))

    async def wait(self, context: ToolContext, args: Args) -> ToolOutcome:
        found = self._job(context, args, "job_id", "job")
        if isinstance(found, ToolOutcome):
            return found
        timeout = _number(args, "timeout_s", DEFAULT_WAIT_S, 0, MAX_TIMEOUT_S)
        if isinstance(timeout, str):
            return ToolOutcome(ok=False, error=timeout)
        try:
            async with asyncio.timeout(timeout):
                await found.settled.wait()
        except TimeoutError:
            pass
        return self._told(found, f"job_wait {found.job_id}")

    async def kill(self, context: ToolContext, args: Args) -> ToolOutcome:
        found = self._job(context, args, "job_id", "job")
        if isinstance(found, ToolOutcome):
            return found
        await self._live.stop(found, ev.JOB_END_REASON_KILLED, KILLED_BY_MODEL)
        return self._told(found, f"job_kill {found.job_id}", killed=True)

    def _told(self, job: Job, summary: str, killed: bool = False) -> ToolOutcome:
        """Its status and the last of its output."""
        assert isinstance(job, BackgroundJob)
        total = job.output.total
        tail = job.output.tail(WAIT_TAIL_BYTES)
        lines = [status(job)]
        if tail:
            shown = len(tail.encode())
            lines.append(
                f"The last {shown} of its {total} bytes of output (job_output reads from any "
                f"offset; next offset {total}):"
                if shown < total
                else f"Its output ({total} bytes; next offset {total}):"
            )
            lines.append(tail)
        else:
            lines.append("(no output)")
        ok = killed or not _ended_badly(job)
        text = "\n".join(lines)
        shown_summary = f"{summary}: {'running' if job.running else 'ended'}"
        display = ToolDisplay(shown_summary, exit_code=_code(job))
        if ok:
            return ToolOutcome(ok=True, output=text, display=display)
        return ToolOutcome(ok=False, error=text, display=display)

    # -- terminals ------------------------------------------------------------------------

    async def open_terminal(self, context: ToolContext, args: Args) -> ToolOutcome:
        command = args.get("command", "")
        if not isinstance(command, str):
            return ToolOutcome(ok=False, error="command must be a string")
        jail = jail_for(context)

        async def start(job_id: str) -> Job | NotStarted:
            return await Terminal.open(job_id, command.strip(), context.cwd, jail)

        try:
            job = await self._launch(context, TERMINAL, start)
        except JobNotStarted as refused:
            return _failed(refused.why, f"terminal $ {_short(command)} (not opened)")
        assert isinstance(job, Terminal)
        sent = await job.wait(None, OPEN_SETTLE_S, first_output=True)
        head = f"Opened {job.job_id} ({job.columns}x{job.rows}): $ {_short(command)}"
        return self._screen(job, head, sent, f"terminal_open {job.job_id}")

    async def send(self, context: ToolContext, args: Args) -> ToolOutcome:
        found = self._job(context, args, "terminal_id", "terminal")
        if isinstance(found, ToolOutcome):
            return found
        assert isinstance(found, Terminal)
        text, enter = args.get("text"), args.get("enter", True)
        if not isinstance(text, str) or not isinstance(enter, bool):
            return ToolOutcome(ok=False, error="text must be a string and enter a boolean")
        timeout = _number(args, "timeout_s", DEFAULT_SEND_TIMEOUT_S, 0, MAX_SEND_TIMEOUT_S)
        if isinstance(timeout, str):
            return ToolOutcome(ok=False, error=timeout)
        pattern = _pattern(args.get("wait_for"))
        if isinstance(pattern, str):
            return ToolOutcome(ok=False, error=pattern)
        if not found.running:
            return self._screen(
                found, status(found), Sent(exited=True), f"terminal_send {found.job_id}"
            )
        wider = widened(found, jail_for(context))
        if wider:
            return ToolOutcome(ok=False, error=f"Not sent: {wider}")
        sent = await found.send(text + ("\r" if enter else ""), pattern, timeout)
        shown = one_line(text, 60)
        return self._screen(found, status(found), sent, f"{found.job_id}> {shown}")

    async def read(self, context: ToolContext, args: Args) -> ToolOutcome:
        found = self._job(context, args, "terminal_id", "terminal")
        if isinstance(found, ToolOutcome):
            return found
        assert isinstance(found, Terminal)
        scrollback = _whole(args, "scrollback", 0, 0, MAX_SCROLLBACK)
        if isinstance(scrollback, str):
            return ToolOutcome(ok=False, error=scrollback)
        return self._screen(found, status(found), None, f"terminal_read {found.job_id}", scrollback)

    async def close_terminal(self, context: ToolContext, args: Args) -> ToolOutcome:
        found = self._job(context, args, "terminal_id", "terminal")
        if isinstance(found, ToolOutcome):
            return found
        await self._live.stop(found, ev.JOB_END_REASON_KILLED, KILLED_BY_MODEL)
        text = f"{status(found)}."
        return ToolOutcome(
            ok=True, output=text, display=ToolDisplay(f"terminal_close {found.job_id}")
        )

    def _screen(
        self, job: Terminal, head: str, sent: Sent | None, summary: str, scrollback: int = 0
    ) -> ToolOutcome:
        lines = [head]
        if sent is not None:
            lines.append(_how_sent(sent))
        line, column = job.cursor()
        lines.append(f"Screen (cursor at line {line}, column {column}):")
        lines.append(job.text(scrollback) or "(blank)")
        return ToolOutcome(ok=True, output="\n".join(lines), display=ToolDisplay(summary))

    # -- the catalog ----------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        # Short schemas: every request of every session carries them.
        job_id, terminal_id = {"job_id": _STRING}, {"terminal_id": _STRING}
        return [
            Tool(
                "job_output",
                "Read a background job's output from a byte offset (default 0); answers "
                "the next offset and whether the job ended.",
                _schema({**job_id, "offset": _WHOLE, "limit": _WHOLE}, ["job_id"]),
                self.output,
                Effect.READ,
            ),
            Tool(
                "job_wait",
                f"Wait for a background job to end (at most timeout_s, default "
                f"{DEFAULT_WAIT_S:g}); answers its status and last output.",
                _schema({**job_id, "timeout_s": _NUMBER}, ["job_id"]),
                self.wait,
                Effect.READ,
            ),
            Tool(
                "job_kill",
                "Stop a background job and all it started.",
                _schema(job_id, ["job_id"]),
                self.kill,
                Effect.NONE,
            ),
            Tool(
                "terminal_open",
                "Open a persistent terminal in the sandbox running command (default: the "
                "user's shell), for interactive programs such as a REPL; answers its screen.",
                _schema({"command": _STRING}, []),
                self.open_terminal,
                Effect.COMMAND,
                describe=_open_approval,
            ),
            Tool(
                "terminal_send",
                "Type text into a terminal (then Enter unless enter is false), wait until "
                "its output settles or wait_for (a regex) matches what it printed since, "
                f"within timeout_s (default {DEFAULT_SEND_TIMEOUT_S:g}); answers its screen.",
                _schema(
                    {
                        **terminal_id,
                        "text": _STRING,
                        "enter": {"type": "boolean"},
                        "wait_for": _STRING,
                        "timeout_s": _NUMBER,
                    },
                    ["terminal_id", "text"],
                ),
                self.send,
                Effect.COMMAND,
                describe=_send_approval,
            ),
            Tool(
                "terminal_read",
                "A terminal's screen, with up to scrollback lines above it.",
                _schema({**terminal_id, "scrollback": _WHOLE}, ["terminal_id"]),
                self.read,
                Effect.READ,
            ),
            Tool(
                "terminal_close",
                "Stop a terminal and all it started.",
                _schema(terminal_id, ["terminal_id"]),
                self.close_terminal,
                Effect.NONE,
            ),
        ]


def _code(job: Job) -> int | None:
    end = job.end
    return end.exit_code if end is not None and end.HasField("exit_code") else None


def _pattern(value: object) -> re.Pattern[str] | str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return "wait_for must be a regular expression"
    try:
        return re.compile(value, re.MULTILINE)
    except re.error as error:
        return f"wait_for is not a regular expression: {error}"


def _how_sent(sent: Sent) -> str:
    if sent.matched:
        return "wait_for matched."
    if sent.exited:
        return "Its program has exited."
    if sent.timed_out:
        return "The timeout passed first (the program may still be working)."
    return "The output settled."


# -- approvals ---------------------------------------------------------------------------------


def _open_approval(args: Args) -> Approval:
    command = str(args.get("command", "") or "").strip()
    grant = f"shell:{command}" if command else "terminal:shell"
    return Approval("terminal_open", f"open a terminal: $ {_short(command)}", command, grant)


def _send_approval(args: Args) -> Approval:
    """Typing into a terminal is a command: the same grant as running it."""
    text, terminal = str(args.get("text", "")), str(args.get("terminal_id", ""))
    summary = f"type into {terminal}: {one_line(text, 120)}"
    return Approval("terminal_send", summary, text, f"shell:{text.strip()}")


# -- the jail a terminal was opened in ----------------------------------------------------------

_STRICTNESS = {READ_ONLY: 0, WORKSPACE_WRITE: 1}


def widened(job: Job, now: Jail | None) -> str:
    """Why typing into `job` would reach beyond what a command of its
    session may do now ("" when it would not): the sandbox or the network
    changed since it was opened, or more paths are hidden now."""
    opened = job.jail
    if now is None:
        return ""  # the full sandbox: nothing is wider than unconfined
    name = job.job_id
    if opened is None:
        why = (
            f"{name} was opened unconfined (the full sandbox), and the sandbox is {now.sandbox} now"
        )
    elif _STRICTNESS.get(opened.sandbox, 1) > _STRICTNESS.get(now.sandbox, 1):
        why = f"{name} was opened under {opened.sandbox}, and the sandbox is {now.sandbox} now"
    elif opened.network and not now.network:
        why = f"{name} was opened with the network on, and it is off now"
    elif [p for p in now.hidden if p not in opened.hidden and p.exists()]:
        why = f"more paths are hidden from commands than when {name} was opened"
    else:
        return ""
    return f"{why}; close it (terminal_close) and open another."
