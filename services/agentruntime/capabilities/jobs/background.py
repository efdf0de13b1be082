"""A background job: a shell command started like any command of its
session (shell.start_command: bubblewrap, the hidden paths, the network
setting, the process limit), left running after the call that started it.

It ends when its shell exits; what it started then goes with it (its
process group is stopped, and in bubblewrap its PID namespace is gone), as
for a command run in the foreground. Its output is held by offset
(output.py).
"""

from __future__ import annotations

from pathlib import Path

from agenthost_core.folds import BACKGROUND

from ...confinement import Jail
from ...shell import NotStarted, StartedCommand, start_command
from .live import Job
from .output import JobOutput


class BackgroundJob(Job):
    kind = BACKGROUND

    def __init__(
        self,
        job_id: str,
        command: str,
        jail: Jail | None,
        process: StartedCommand,
        output: JobOutput,
    ) -> None:
        super().__init__(job_id, command, jail)
        self.process = process
        self.output = output

    @classmethod
    async def start(
        cls, job_id: str, command: str, cwd: Path, jail: Jail | None
    ) -> BackgroundJob | NotStarted:
        output = JobOutput()
        process = await start_command(command, cwd, output, jail=jail)
        if isinstance(process, NotStarted):
            return process
        return cls(job_id, command, jail, process, output)

    async def exited(self) -> tuple[int | None, int | None]:
        await self.process.exited.wait()
        # Whatever it left running in its group goes too, and its output closes.
        await self.process.stop()
        self.process.cleanup_soon()
        code = self.process.returncode
        if code is None:
            return None, None
        return (code, None) if code >= 0 else (None, -code)

    async def terminate(self) -> None:
        await self.process.stop()

    @property
    def output_bytes(self) -> int:
        return self.output.total

    def output_tail(self, limit: int) -> str:
        return self.output.tail(limit)
