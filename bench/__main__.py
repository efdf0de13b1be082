"""`make bench` (`python -m bench`): every figure against its baseline
measured in the same run, written to build/bench/report.md and report.json
and printed; exits 1 when a regression guard is missed or a figure fails.

`--smoke` runs every figure's code path with tiny sizes (CI, under a
minute): the report is written, guards are not enforced (noisy machines),
only a failing figure fails the run."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType

from bench import (
    batched_appends,
    checkpoint,
    cold_open,
    concurrent_appends,
    confined_command,
    memory,
    open_session,
    plan_mode_read,
    postgres_reads,
    request_build,
    runtime_memory,
    session_search,
    set_plan_mode,
    startup,
    stream_fanout,
    streaming,
    subagent_start,
)
from bench.harness import FULL, SMOKE, Sizes
from bench.ratio import Figure
from bench.report import Report, machine
from services.common.logs import configure_logging

FIGURES: list[ModuleType] = [
    plan_mode_read,
    set_plan_mode,
    open_session,
    concurrent_appends,
    batched_appends,
    cold_open,
    stream_fanout,
    request_build,
    memory,
    postgres_reads,
    confined_command,
    runtime_memory,
    checkpoint,
    subagent_start,
    session_search,
    startup,
    streaming,
]
REPO = Path(__file__).resolve().parents[1]
# A module measures one figure, or several sharing their stacks and rounds.
Runner = Callable[[Sizes, Path], Awaitable[Figure | list[Figure]]]


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes; guards not enforced")
    parser.add_argument(
        "--only", nargs="+", choices=[m.NAME for m in FIGURES], help="run only these figures"
    )
    parser.add_argument("--out", type=Path, default=REPO / "build" / "bench", help="report folder")
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="where the stacks keep their data (default: a fresh folder under --out, "
        "so on the checkout's disk rather than a tmpfs)",
    )
    return parser.parse_args()


async def _run_all(modules: list[ModuleType], sizes: Sizes, root: Path, report: Report) -> None:
    for module in modules:
        print(f"bench: {module.NAME} ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        data_dir = root / module.NAME
        data_dir.mkdir(parents=True)
        runner: Runner = module.run
        try:
            figures = await runner(sizes, data_dir)
            report.figures.extend(figures if isinstance(figures, list) else [figures])
        except Exception as error:  # one broken figure must not hide the others
            traceback.print_exc()
            report.errors[module.NAME] = f"{type(error).__name__}: {error}"
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)
        print(f"bench: {module.NAME} took {time.perf_counter() - started:.1f} s", file=sys.stderr)


def main() -> int:
    args = _arguments()
    # What `agenthost up` does: the services log warnings only.
    configure_logging("bench", "WARNING")
    args.out.mkdir(parents=True, exist_ok=True)
    parent = args.data_dir or args.out
    parent.mkdir(parents=True, exist_ok=True)
    # Absolute: sessions are made with folders under it as their cwd.
    root = Path(tempfile.mkdtemp(prefix="data-", dir=parent)).resolve()
    modules = [m for m in FIGURES if not args.only or m.NAME in args.only]
    report = Report("smoke" if args.smoke else "full", machine(root))
    started = time.perf_counter()
    try:
        asyncio.run(_run_all(modules, SMOKE if args.smoke else FULL, root, report))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.duration_s = time.perf_counter() - started
    markdown, data = report.write(args.out)
    print(report.markdown())
    print(f"written: {markdown} and {data}", file=sys.stderr)
    if report.errors:
        return 1
    return 0 if args.smoke or not report.missed else 1


if __name__ == "__main__":
    sys.exit(main())
