"""A checkpoint of a large workspace, p50, against `git status` on the same
tree: what a turn's snapshot (its first change, its end) costs.

The workspace is a git repository of 10,000 files (smoke: 300) in 100
folders. Each sample of both sides first rewrites one file (another each
time); the measured side then takes a snapshot in the workspace's shadow
repository (capabilities/checkpoints/snapshots.py: the stat of every file
against the shadow index, the changed file hashed, the tree written), the
baseline runs `git status --porcelain` in the repository itself. One
snapshot is taken before the rounds (the first of a workspace hashes every
file). Target: at most 3x."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from bench.harness import Sizes
from bench.ratio import Figure, Target, interleaved, latency_side
from services.agentruntime.capabilities.checkpoints.snapshots import ShadowRepo

NAME = "checkpoint"
FOLDERS = 100


def _workspace(folder: Path, files: int) -> list[Path]:
    """A committed repository of `files` small source files."""
    folder.mkdir()
    paths = []
    for n in range(files):
        path = folder / f"pkg{n % FOLDERS:03d}" / f"module_{n:05d}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"def f{n}(x):\n    return x + {n}\n" * 10)
        paths.append(path)
    git = ["git", "-C", str(folder), "-c", "user.name=bench", "-c", "user.email=b@b"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "files"], check=True)
    return paths


async def run(sizes: Sizes, data_dir: Path) -> Figure:
    folder = data_dir / "workspace"
    paths = await asyncio.to_thread(_workspace, folder, sizes.checkpoint_files)
    repo = ShadowRepo(data_dir / "shadow", folder)
    await repo.snapshot()
    changes = iter(range(10**9))

    def change_one() -> None:
        n = next(changes)
        paths[n % len(paths)].write_text(f"def changed():\n    return {n}\n")

    async def snapshot() -> None:
        change_one()
        await repo.snapshot()

    async def git_status() -> None:
        change_one()
        process = await asyncio.create_subprocess_exec(
            "git", "-C", str(folder), "status", "--porcelain", stdout=asyncio.subprocess.DEVNULL
        )
        assert await process.wait() == 0

    per_round = max(sizes.per_round // 10, 2)
    measured, baseline = await interleaved(snapshot, git_status, sizes.rounds, per_round)
    return Figure(
        name=f"checkpoint of a {sizes.checkpoint_files:,}-file workspace, one file changed",
        compared="p50",
        unit="ms",
        measured=latency_side("snapshot in the shadow repository", measured, "p50"),
        baseline=latency_side("`git status` on the same tree", baseline, "p50"),
        target=Target("<=", 3.0),
    )
