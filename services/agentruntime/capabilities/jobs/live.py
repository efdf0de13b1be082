"""The jobs and terminals running on this runtime, by session, and the
record of the sessions that have some (so that a runtime starting after one
that died finds them).

A job lives here as long as its processes run: it is recorded in the log
when it starts (job/started) and when it ends (job/ended, by the task that
watches it), through its session's scope. Ended jobs are kept a while (what
they wrote can still be read), and forgotten with their session.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import BACKGROUND, TERMINAL
from services.common.errors import LeaseLost
from services.common.tasks import spawn

from ...capability import SessionScope
from ...confinement import Jail
from ...gates import FULL
from ...shell import NotStarted

log = logging.getLogger("agenthost.runtime")

# Ended jobs kept per session for their output, the latest first.
ENDED_KEPT = 20
# A notice shows this much of a job's last output; a job/started this much
# of its command (events.proto's bounds).
TAIL_BYTES = 4096
COMMAND_BYTES = 65536
# Pauses before recording a job's end again (the log away for a moment).
RECORD_RETRY_S = (0.2, 1.0, 3.0)
KINDS = {BACKGROUND: ev.JOB_KIND_BACKGROUND, TERMINAL: ev.JOB_KIND_TERMINAL}
PREFIXES = {BACKGROUND: "job", TERMINAL: "term"}


class Job:
    """One background job or terminal: its processes and how it ended."""

    kind = BACKGROUND

    def __init__(self, job_id: str, command: str, jail: Jail | None) -> None:
        self.job_id = job_id
        self.command = command
        # What it was confined by (None: unconfined, the full sandbox).
        self.jail = jail
        self.started_at = time.monotonic()
        self.ended_at: float | None = None
        # Its job/ended, once its end is known (recorded, unless `recorded`
        # was turned off because another runtime owns the session now).
        self.end: ev.JobEnded | None = None
        self.settled = asyncio.Event()
        # Set once its start is recorded (or could not be).
        self.announced = asyncio.Event()
        # The task that records its end (held: a task nobody holds may be collected).
        self.watcher: asyncio.Task[None] | None = None
        # Why it was stopped, when it did not end by itself.
        self.stopped: tuple[ev.JobEndReason.ValueType, str] | None = None
        self.recorded = True

    @property
    def running(self) -> bool:
        return self.end is None

    @property
    def sandbox(self) -> str:
        return self.jail.sandbox if self.jail is not None else FULL

    @property
    def seconds(self) -> float:
        end = self.ended_at if self.ended_at is not None else time.monotonic()
        return end - self.started_at

    async def exited(self) -> tuple[int | None, int | None]:
        """Wait until its processes are gone: (exit code, signal)."""
        raise NotImplementedError

    async def terminate(self) -> None:
        """Stop its processes (exited() then returns)."""
        raise NotImplementedError

    @property
    def output_bytes(self) -> int:
        raise NotImplementedError

    def output_tail(self, limit: int) -> str:
        raise NotImplementedError


class Markers:
    """A file per session with jobs running here, in the stack's data folder
    (hidden from commands): a runtime that starts after one that died loads
    those sessions, and their loads record the jobs lost. No folder: none."""

    def __init__(self, folder: Path | None) -> None:
        self._folder = folder

    def _path(self, session_id: str) -> Path | None:
        if self._folder is None:
            return None
        return self._folder / hashlib.sha256(session_id.encode()).hexdigest()[:32]

    def mark(self, session_id: str) -> None:
        path = self._path(session_id)
        if path is not None and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(session_id)

    def unmark(self, session_id: str) -> None:
        path = self._path(session_id)
        if path is not None:
            path.unlink(missing_ok=True)

    def sessions(self) -> list[str]:
        if self._folder is None or not self._folder.is_dir():
            return []
        found = []
        for path in self._folder.iterdir():
            with contextlib.suppress(OSError, UnicodeDecodeError):
                found.append(path.read_text().strip())
        return [session_id for session_id in found if session_id]


@dataclass
class SessionJobs:
    jobs: dict[str, Job] = field(default_factory=dict)
    # How many of each kind the session ever started (its log's count).
    counts: dict[str, int] = field(default_factory=dict)


Spawn = Callable[[str], Awaitable[Job | NotStarted]]


class LiveJobs:
    def __init__(self, markers: Markers) -> None:
        self.markers = markers
        self._sessions: dict[str, SessionJobs] = {}

    def _of(self, session_id: str) -> SessionJobs:
        return self._sessions.setdefault(session_id, SessionJobs())

    # -- looking --------------------------------------------------------------------

    def find(self, session_id: str, job_id: str) -> Job | None:
        found = self._sessions.get(session_id)
        return found.jobs.get(job_id) if found is not None else None

    def jobs(self, session_id: str) -> list[Job]:
        found = self._sessions.get(session_id)
        return list(found.jobs.values()) if found is not None else []

    def running(self, session_id: str) -> list[Job]:
        return [job for job in self.jobs(session_id) if job.running]

    def counted(self, session_id: str, backgrounds: int, terminals: int) -> None:
        """The counts the session's log has (so ids go on after them)."""
        counts = self._of(session_id).counts
        counts[BACKGROUND] = max(counts.get(BACKGROUND, 0), backgrounds)
        counts[TERMINAL] = max(counts.get(TERMINAL, 0), terminals)

    # -- starting and ending ----------------------------------------------------------

    async def launch(self, scope: SessionScope, kind: str, call_id: str, spawn_job: Spawn) -> Job:
        """Start a job (`spawn_job` given its id) and record it; NotStarted
        is raised as JobNotStarted with why."""
        session_id = scope.session_id
        session = self._of(session_id)
        number = session.counts.get(kind, 0) + 1
        session.counts[kind] = number
        job_id = f"{PREFIXES[kind]}-{number}"
        # Marked before it runs: a runtime killed at any point after leaves it found.
        self.markers.mark(session_id)
        made = await spawn_job(job_id)
        if isinstance(made, NotStarted):
            self._unmark_if_idle(session_id)
            raise JobNotStarted(made.refused or made.reason)
        session.jobs[job_id] = made
        made.watcher = spawn(self._watch(scope, made), name=f"job-{session_id}-{job_id}")
        started = ev.JobStarted(
            job_id=job_id,
            kind=KINDS[kind],
            command=_bytes_at_most(made.command, COMMAND_BYTES),
            call_id=call_id,
            sandbox=made.sandbox,
            network=made.jail.network if made.jail is not None else True,
        )
        try:
            await scope.record([ev.Event(job_started=started)])
        except BaseException:
            # Unrecorded, it must not run: nobody could see or stop it.
            made.recorded = False
            made.announced.set()
            await self.stop(made, ev.JOB_END_REASON_KILLED, "its start could not be recorded")
            raise
        made.announced.set()
        return made

    async def _watch(self, scope: SessionScope, job: Job) -> None:
        """Wait for the job to end, then record how."""
        exit_code, signal = await job.exited()
        job.ended_at = time.monotonic()
        await job.announced.wait()  # its end is recorded after its start
        reason, message = job.stopped or (ev.JOB_END_REASON_EXITED, "")
        ended = ev.JobEnded(
            job_id=job.job_id,
            reason=reason,
            message=message,
            output_bytes=job.output_bytes,
            output_tail=_bytes_at_most(job.output_tail(TAIL_BYTES), TAIL_BYTES, from_end=True),
        )
        if exit_code is not None:
            ended.exit_code = exit_code
        if signal is not None:
            ended.signal = signal
        recorded = job.recorded and await _record(scope, ended)
        job.end = ended
        job.settled.set()
        self._kept(scope.session_id)
        if recorded:
            self._unmark_if_idle(scope.session_id)

    async def stop(
        self, job: Job, reason: ev.JobEndReason.ValueType, message: str, *, record: bool = True
    ) -> None:
        """Stop a running job and wait until its end is settled."""
        if job.running:
            job.stopped = job.stopped or (reason, message)
            job.recorded = job.recorded and record
            await job.terminate()
        await job.settled.wait()

    async def release(
        self, session_id: str, reason: ev.JobEndReason.ValueType, message: str, *, record: bool
    ) -> int:
        """Stop every job of the session; how many ran."""
        running = self.running(session_id)
        await asyncio.gather(*(self.stop(job, reason, message, record=record) for job in running))
        return len(running)

    def forget(self, session_id: str) -> None:
        """Drop what is kept of a session nothing runs in any more."""
        if not self.running(session_id):
            self._sessions.pop(session_id, None)

    def _kept(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            return
        ended = [job for job in session.jobs.values() if not job.running]
        for job in ended[: max(len(ended) - ENDED_KEPT, 0)]:
            del session.jobs[job.job_id]

    def _unmark_if_idle(self, session_id: str) -> None:
        if not self.running(session_id):
            self.markers.unmark(session_id)

    def settle(self, session_id: str) -> None:
        """Nothing the log shows running is unsettled any more (the load
        recorded the rest lost): the marker can go when nothing runs."""
        self._unmark_if_idle(session_id)


class JobNotStarted(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


async def _record(scope: SessionScope, ended: ev.JobEnded) -> bool:
    """Record a job's end, again after a pause while the log is away; False
    when it could not be (its marker then stays: a later load settles it)."""
    for pause in (*RECORD_RETRY_S, None):
        try:
            await scope.record([ev.Event(job_ended=ended)])
            return True
        except LeaseLost:
            return False  # another runtime owns the session; its load settles the job
        except Exception as error:
            if pause is None:
                log.warning(
                    "could not record the end of %s: %s",
                    ended.job_id,
                    error,
                    extra={"session_id": scope.session_id},
                )
                return False
        await asyncio.sleep(pause)  # a pause before trying again, not synchronisation
    return False


def _bytes_at_most(text: str, limit: int, *, from_end: bool = False) -> str:
    """`text` cut to `limit` UTF-8 bytes (its start, or its end), whole characters."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    kept = raw[-limit:] if from_end else raw[:limit]
    return kept.decode(errors="ignore")
