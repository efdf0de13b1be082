"""Background jobs and terminals: commands that outlive the call that
started them, confined like every command of their session.

- `shell` with background: true starts a job and answers its id at once;
  job_output reads what it wrote by offset, job_wait waits for its end
  (bounded), job_kill stops it (background.py, output.py).
- terminal_open runs a program (the user's shell by default) on a pty in
  the session's sandbox; terminal_send types into it and waits for the
  output to settle or for a pattern; terminal_read answers the screen as
  pyte renders it; terminal_close stops it (terminal.py).

Each is logged when it starts and when it ends (job/started, job/ended),
folded into the session's state and the `jobs` projection, and listed by
/jobs (/terminals: the terminals, or one's screen). The model is told of a
job's end at its next request (a context/added), unless a tool already told
it. A job runs as long as this runtime runs it (live.py): it stops with its
session (archived, deleted) and with the runtime (recorded as closed), and
one whose runtime died is recorded as lost when its session is next loaded,
or when a runtime starts on the same data folder (live.Markers).
"""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Sequence
from pathlib import Path

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import (
    BACKGROUND,
    TERMINAL,
    JobRecord,
    JobsFold,
    fold_jobs,
    jobs_view,
    load_jobs,
)
from agenthost_core.folds import JOBS_KINDS as FOLDED_KINDS
from services.common.errors import SessionNotFound, SessionOwnedElsewhere
from services.projection.unit import FoldUnit

from ...capability import (
    AgentHandle,
    Capability,
    Command,
    CommandResult,
    LoadSession,
    Release,
    SessionPart,
    SessionScope,
)
from ...tools import Call, Tool, ToolContext, ToolOutcome
from .live import Job, JobNotStarted, LiveJobs, Markers
from .terminal import Terminal
from .tools import JOB_TOOLS, JobTools, Spawn, duration, how_it_ended, status

log = logging.getLogger("agenthost.runtime")
NAME = "jobs"
LOST = "its runtime stopped before it ended (or this session is a fork of the one it ran in)"
CLOSED_WITH_SESSION = "its session was archived or deleted"
CLOSED_WITH_RUNTIME = "the runtime stopped"
KILLED_BY_USER = "stopped by the user (/jobs kill)"
NOTICE_TAIL_LINES = 10
NOTICE_TAIL_CHARS = 1000

JOBS_UNIT = FoldUnit("jobs", 1, JobsFold, fold_jobs, jobs_view, load_jobs, FOLDED_KINDS)


class Jobs(Capability):
    """The jobs and terminals of every session this runtime runs; `folder`
    (in the stack's data folder) records the sessions that have some."""

    name = NAME

    def __init__(self, folder: Path | None = None) -> None:
        self.live = LiveJobs(Markers(folder))
        # Each session's scope, as its latest view made it: how a job of it
        # records its start and end.
        self._scopes: dict[str, SessionScope] = {}
        self._tools = JobTools(self.live, self._launch)

    def tools(self) -> Sequence[Tool]:
        return self._tools.tools()

    def session(self, scope: SessionScope) -> SessionPart:
        self._scopes[scope.session_id] = scope
        return JobsPart(self, scope)

    async def _launch(self, context: ToolContext, kind: str, spawn: Spawn) -> Job:
        scope = self._scopes.get(context.session_id)
        if scope is None:  # a call runs after a model request, which made the part
            raise JobNotStarted("the session's jobs are not ready; try again")
        return await self.live.launch(scope, kind, context.call_id, spawn)

    async def start_background(self, call: Call, context: ToolContext) -> ToolOutcome:
        return await self._tools.start_background(context, call.args)

    # -- the runtime's questions -----------------------------------------------------------

    async def loaded(self, agent: AgentHandle) -> None:
        """Jobs the log shows running that do not run here were lost with
        the runtime that ran them (or the session is a fork of where they
        ran): recorded so. One that ended here unrecorded is recorded now."""
        session_id = agent.session_id
        jobs = agent.state.jobs
        self.live.counted(session_id, jobs.backgrounds, jobs.terminals)
        settled = []
        for record in jobs.running():
            here = self.live.find(session_id, record.job_id)
            if here is not None and here.running:
                continue
            ended = here.end if here is not None and here.end is not None else None
            settled.append(
                ended
                or ev.JobEnded(job_id=record.job_id, reason=ev.JOB_END_REASON_LOST, message=LOST)
            )
        if settled:
            await agent.record([ev.Event(job_ended=ended) for ended in settled])
        self.live.settle(session_id)

    def holds(self, session_id: str) -> bool:
        return bool(self.live.running(session_id))

    async def release(self, session_id: str, why: Release) -> int:
        stopped = 0
        if why is Release.CLOSED:
            stopped = await self.live.release(
                session_id, ev.JOB_END_REASON_CLOSED, CLOSED_WITH_SESSION, record=True
            )
        elif why is Release.STOPPED:
            stopped = await self.live.release(
                session_id, ev.JOB_END_REASON_CLOSED, CLOSED_WITH_RUNTIME, record=True
            )
        elif why is Release.DROPPED:
            stopped = await self.live.release(
                session_id, ev.JOB_END_REASON_CLOSED, CLOSED_WITH_RUNTIME, record=False
            )
        self.live.forget(session_id)
        if not self.live.jobs(session_id):
            self._scopes.pop(session_id, None)
        return stopped

    async def recover(self, load: LoadSession) -> None:
        for session_id in self.live.markers.sessions():
            try:
                await load(session_id)
            except SessionNotFound:
                self.live.markers.unmark(session_id)
            except SessionOwnedElsewhere:
                pass  # its owner runs it (and its jobs)
            except Exception as error:
                log.warning(
                    "could not settle the jobs of %s: %s",
                    session_id,
                    error,
                    extra={"session_id": session_id},
                )

    # -- commands ----------------------------------------------------------------------------

    def commands(self) -> Sequence[Command]:
        return (
            Command(
                "jobs",
                "List the background jobs and terminals; `/jobs kill ID` stops one.",
                "/jobs | /jobs kill ID",
                self._jobs_command,
            ),
            Command(
                "terminals",
                "List the terminals; `/terminals ID` shows one's screen.",
                "/terminals | /terminals ID",
                self._terminals_command,
            ),
        )

    async def _jobs_command(self, agent: AgentHandle, args: str | None) -> CommandResult:
        await agent.catch_up()
        words = shlex.split(args or "")
        if not words:
            return CommandResult(True, self._listing(agent, None), agent.state.last_seq)
        if len(words) != 2 or words[0] != "kill":
            return CommandResult(False, "usage: /jobs | /jobs kill ID", agent.state.last_seq)
        job = self.live.find(agent.session_id, words[1])
        if job is None or not job.running:
            return CommandResult(False, f"{words[1]} is not running here", agent.state.last_seq)
        await self.live.stop(job, ev.JOB_END_REASON_KILLED, KILLED_BY_USER)
        await agent.catch_up()
        return CommandResult(True, status(job), agent.state.last_seq)

    async def _terminals_command(self, agent: AgentHandle, args: str | None) -> CommandResult:
        await agent.catch_up()
        words = shlex.split(args or "")
        if not words:
            return CommandResult(True, self._listing(agent, TERMINAL), agent.state.last_seq)
        job = self.live.find(agent.session_id, words[0])
        if isinstance(job, Terminal):
            return CommandResult(True, f"{status(job)}\n{job.text()}", agent.state.last_seq)
        record = agent.state.jobs.find(words[0])
        if record is None or record.kind != TERMINAL:
            return CommandResult(False, f"no terminal {words[0]}", agent.state.last_seq)
        gone = f"{self._line(agent.session_id, record)}\n(its screen is gone with its program)"
        return CommandResult(True, gone, agent.state.last_seq)

    def _listing(self, agent: AgentHandle, kind: str | None) -> str:
        records = [r for r in agent.state.jobs.jobs if kind is None or r.kind == kind]
        if not records:
            return "No terminals." if kind == TERMINAL else "No background jobs or terminals."
        return "\n".join(self._line(agent.session_id, record) for record in records)

    def _line(self, session_id: str, record: JobRecord) -> str:
        here = self.live.find(session_id, record.job_id)
        if record.running:
            when = f"running {duration(here.seconds)}" if here is not None else "running"
        elif record.exit_code is not None:
            when = f"{record.state} {record.exit_code}"
        elif record.signal is not None:
            when = f"{record.state} (signal {record.signal})"
        else:
            when = record.state
        command = record.command or "(the user's shell)"
        return f"{record.job_id:<8} {when:<16} $ {command}"


class JobsPart(SessionPart):
    """Tells the model of the jobs that ended since it last heard of them,
    folded from its view: a job/ended is owed a notice until a notice, or
    the result of a job tool naming that job, follows it."""

    def __init__(self, capability: Jobs, scope: SessionScope) -> None:
        self._capability = capability
        self._scope = scope
        self._owed: dict[str, ev.JobEnded] = {}
        # The commands of the jobs the view saw start.
        self._commands: dict[str, tuple[str, str]] = {}
        # Job tool calls of the view waiting for their result: call -> job.
        self._asking: dict[str, str] = {}

    def observe(self, event: ev.Event) -> None:
        kind = event.WhichOneof("body")
        if kind == "job_started":
            started = event.job_started
            shown = TERMINAL if started.kind == ev.JOB_KIND_TERMINAL else BACKGROUND
            self._commands[started.job_id] = (shown, started.command)
        elif kind == "job_ended":
            self._owed[event.job_ended.job_id] = event.job_ended
        elif kind == "tool_call" and event.tool_call.name in JOB_TOOLS:
            named = _named(event.tool_call.args_json, JOB_TOOLS[event.tool_call.name])
            if named:
                self._asking[event.tool_call.call_id] = named
        elif kind == "tool_result" and event.tool_result.call_id in self._asking:
            self._owed.pop(self._asking.pop(event.tool_result.call_id), None)
        elif kind == "context_added" and event.context_added.capability == NAME:
            self._owed.clear()
        elif kind == "compaction":
            self._owed.clear()  # its context carried them (carried())
            self._asking.clear()

    async def run(self, call: Call, context: ToolContext) -> ToolOutcome | None:
        if call.tool.name == "shell" and call.args.get("background") is True:
            return await self._capability.start_background(call, context)
        return None

    async def before_request(self) -> list[ev.Event]:
        if not self._owed:
            return []
        text = "\n".join(self._notice(ended) for ended in self._owed.values())
        return [ev.Event(context_added=ev.ContextAdded(capability=NAME, text=text))]

    def carried(self) -> list[ev.ContextAdded]:
        lines = [self._notice(ended) for ended in self._owed.values()]
        running = self._capability.live.running(self._scope.session_id)
        if running:
            listed = "; ".join(f"{job.job_id} ($ {job.command or 'shell'})" for job in running)
            lines.append(f"[Background jobs and terminals still running: {listed}.]")
        return [ev.ContextAdded(capability=NAME, text="\n".join(lines))] if lines else []

    def _notice(self, ended: ev.JobEnded) -> str:
        kind, command = self._commands.get(ended.job_id, (BACKGROUND, ""))
        here = self._capability.live.find(self._scope.session_id, ended.job_id)
        if here is not None:
            kind, command = here.kind, here.command
        name = "Terminal" if kind == TERMINAL else "Background job"
        said = f"[{name} {ended.job_id}"
        if command:
            said += f" ($ {command[:200]})"
        said += f" {how_it_ended(ended)}"
        if here is not None:
            said += f" after {duration(here.seconds)}"
        tail = _tail(ended.output_tail)
        if not tail or kind == TERMINAL:
            return said + ".]"
        said += f"; it wrote {ended.output_bytes} bytes, the last of them:\n{tail}"
        if here is not None:
            said += "\n(job_output reads all of it)"
        return said + "]"


def _named(args_json: str, key: str) -> str:
    try:
        args = json.loads(args_json or "{}")
    except json.JSONDecodeError:
        return ""
    value = args.get(key) if isinstance(args, dict) else None
    return value if isinstance(value, str) else ""


def _tail(text: str) -> str:
    lines = text.rstrip("\n").splitlines()[-NOTICE_TAIL_LINES:]
    return "\n".join(lines)[-NOTICE_TAIL_CHARS:]


__all__ = ["JOBS_UNIT", "Jobs"]
