"""A command confined by bubblewrap, p50, against the same command run
unconfined: what the sandbox adds to every shell call of the agent.

Both sides run `true` through the shell tool's own runner (run_shell: the
process group, the output capture, the kill on exit) in a workspace folder;
the measured side under the `workspace-write` jail (bwrap's namespaces and
mounts, the process limit: prlimit in the sandbox, or a pids cgroup when the
runtime is root), the baseline unconfined. Target: at most 30 ms more at p50."""

from __future__ import annotations

import math
from pathlib import Path

from bench.harness import Sizes
from bench.ratio import Figure, Target, interleaved, latency_side
from services.agentruntime.confinement import Jail, probe
from services.agentruntime.gates import WORKSPACE_WRITE
from services.agentruntime.shell import run_shell

NAME = "confined_command"
COMMAND = "true"
TIMEOUT_S = 30.0


async def run(sizes: Sizes, data_dir: Path) -> Figure:
    problem = probe()
    if problem is not None:
        raise RuntimeError(f"commands cannot be confined here: {problem.reason}: {problem.message}")
    workspace = data_dir / "workspace"
    workspace.mkdir()
    jail = Jail(WORKSPACE_WRITE, workspace, hidden=(data_dir / "hidden",))

    async def confined() -> None:
        result = await run_shell(COMMAND, workspace, timeout_s=TIMEOUT_S, jail=jail)
        assert result.exit_code == 0, result.output or result.refused

    async def unconfined() -> None:
        result = await run_shell(COMMAND, workspace, timeout_s=TIMEOUT_S)
        assert result.exit_code == 0, result.output

    measured, baseline = await interleaved(confined, unconfined, sizes.rounds, sizes.per_round)
    return Figure(
        name="shell command confined by bubblewrap",
        compared="p50",
        unit="ms",
        measured=latency_side("`true` under the workspace-write jail", measured, "p50"),
        baseline=latency_side("`true` unconfined", baseline, "p50"),
        target=Target("<=", math.inf, overhead=30.0),
    )
