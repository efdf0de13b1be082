"""Where a figure's time goes: `python -m bench.profile WORKLOAD`.

Runs one figure's load (the bench's own code for it, on a stack like the
bench's) for `--seconds` under cProfile and prints, in markdown, the share
of the event loop's time by part (self time, summed by where the code
lives), then the project's functions by cumulative time. Only the loop's
thread is profiled: the stores' threads show as the loop waiting for them.
cProfile costs each Python call, so shares, not absolute times, are what it
tells; `make bench` measures the figures themselves.

Workloads (each the figure's call or round, repeated):
  set_plan_mode   a SetPlanMode that commits, one after another
  open_session    OpenSession of a 100-event session
  appenders       16 concurrent single-event appenders (`--alone`: the session log alone)
  batched         100-event appends, one writer (`--alone` likewise)
  fanout          one append at a time to a session 100 Connect streams follow
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import tempfile
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from agenthost.gateway.v1 import gateway_pb2 as gw

from bench import batched_appends, concurrent_appends, set_plan_mode, stream_fanout
from bench.harness import (
    CALL_TIMEOUT_S,
    FULL,
    gateway_session,
    running_stack,
    session_log_alone,
)
from bench.ratio import Round, RoundResult, run_for
from services.common.logs import configure_logging
from services.sessionlog.client import SessionLogClient

REPO = Path(__file__).resolve().parents[1]

# A function's part: the first matching prefix of its file (or its name, for
# built-ins); services by domain.
PARTS = (
    ("<method 'poll' of 'select.epoll'", "idle: the loop waits (fsync, store threads, sockets)"),
    ("selectors.py", "idle: the loop waits (fsync, store threads, sockets)"),
    ("/bench/", "the bench's own client"),
    ("<method 'collect_violations'", "request validation (protovalidate)"),
    ("services/common/validation", "request validation (protovalidate)"),
    ("<method 'run' of '_contextvars.Context'", "grpc.aio and asyncio callbacks (C)"),
    ("grpc/", "grpc.aio (Python)"),
    ("asyncio/", "asyncio"),
    ("services/common/local", "in-process peer calls"),
    ("services/common/", "services/common (guard, clients)"),
    ("services/", "services/"),  # then the domain's folder
    ("agenthost_core/", "agenthost_core (folds)"),
    ("<method 'SerializeToString'", "protobuf copies"),
    ("<method 'FromString'", "protobuf copies"),
    ("<built-in method FromString>", "protobuf copies"),
    ("<method 'CopyFrom'", "protobuf copies"),
    ("<method 'MergeFrom'", "protobuf copies"),
    ("<built-in method from_binary>", "protobuf copies"),
)


def part_of(filename: str, function: str) -> str:
    where = function if filename == "~" else filename
    for prefix, part in PARTS:
        at = where.find(prefix)
        if at < 0:
            continue
        if part == "services/":
            return "/".join(where[at:].split("/")[:2])
        return part
    return "other (stdlib, libraries)"


def shares(stats: pstats.Stats) -> list[tuple[str, float]]:
    by_part: dict[str, float] = defaultdict(float)
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, dict[object, object]]]
    raw = stats.stats  # type: ignore[attr-defined]
    for (filename, _, function), (_, _, self_s, _, _) in raw.items():
        by_part[part_of(filename, function)] += self_s
    total = sum(by_part.values()) or 1.0
    return sorted(((p, s / total) for p, s in by_part.items()), key=lambda x: -x[1])


def ours(stats: pstats.Stats, count: int) -> list[tuple[str, float, int]]:
    raw = stats.stats  # type: ignore[attr-defined]
    rows = [
        (f"{Path(filename).relative_to(REPO)}:{line} {function}", cumulative, calls)
        for (filename, line, function), (_, calls, _, cumulative, _) in raw.items()
        if filename.startswith(str(REPO)) and not any(d in filename for d in ("/bench/", "/.venv/"))
    ]
    return sorted(rows, key=lambda row: -row[1])[:count]


@asynccontextmanager
async def workload(name: str, alone: bool, data_dir: Path) -> AsyncIterator[Round]:
    """The figure's load, as a callable repeating it for a number of seconds."""
    if alone:
        async with session_log_alone(data_dir) as log:
            yield await _appends(name, log, data_dir)
        return
    async with running_stack(data_dir) as stack:
        if name in ("appenders", "batched"):
            yield await _appends(name, stack.log, stack.workdir)
        elif name == "set_plan_mode":
            yield _calls(set_plan_mode.toggle(stack, await gateway_session(stack)))
        elif name == "open_session":
            request = gw.OpenSessionRequest(session_id=await gateway_session(stack, 100))
            yield _calls(lambda: stack.gateway.OpenSession(request, timeout=CALL_TIMEOUT_S))
        else:
            session_id = await gateway_session(stack)

            async def fanout(_: int) -> int:
                await stream_fanout.fanout_round(stack, [session_id], FULL.streams, 50, "p")
                return 50

            yield lambda seconds: run_for(seconds, 1, fanout)


async def _appends(name: str, log: SessionLogClient, cwd: Path) -> Round:
    if name == "appenders":
        return await concurrent_appends.appenders(log, cwd, FULL)
    return await batched_appends.appender(log, cwd, FULL.batch)


def _calls(call: Callable[[], Awaitable[object]]) -> Round:
    async def one(_: int) -> int:
        await call()
        return 1

    return lambda seconds: run_for(seconds, 1, one)


async def profile(name: str, alone: bool, seconds: float) -> tuple[pstats.Stats, RoundResult]:
    with tempfile.TemporaryDirectory(dir=REPO / "build") as data:
        async with workload(name, alone, Path(data)) as rounds:
            await rounds(1.0)  # warm up, unprofiled
            profiler = cProfile.Profile()
            profiler.enable()
            done = await rounds(seconds)
            profiler.disable()
    return pstats.Stats(profiler), done


def report(name: str, stats: pstats.Stats, done: RoundResult, top: int) -> str:
    unit = "call" if name.split(",")[0] in ("set_plan_mode", "open_session") else "event"
    per_item_ms = done.elapsed_s / max(done.items, 1) * 1e3
    lines = [
        f"### {name}",
        "",
        f"{done.items} {unit}s in {done.elapsed_s:.1f} s under the profiler: "
        f"{per_item_ms:.3g} ms per {unit}",
        "",
        f"| part | share of the loop's time | ms per {unit} |",
        "|---|---|---|",
    ]
    lines += [
        f"| {part} | {share:.0%} | {share * per_item_ms:.3f} |"
        for part, share in shares(stats)
        if share >= 0.005
    ]
    lines += ["", "| function (ours) | cumulative s | calls |", "|---|---|---|"]
    lines += [
        f"| `{where}` | {cumulative:.3f} | {calls} |"
        for where, cumulative, calls in ours(stats, top)
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "workload", choices=["set_plan_mode", "open_session", "appenders", "batched", "fanout"]
    )
    parser.add_argument("--alone", action="store_true", help="the session log alone")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--top", type=int, default=15, help="functions of ours listed")
    args = parser.parse_args()
    if args.alone and args.workload not in ("appenders", "batched"):
        parser.error("--alone is for appenders and batched")
    configure_logging("bench", "WARNING")
    (REPO / "build").mkdir(exist_ok=True)
    stats, done = asyncio.run(profile(args.workload, args.alone, args.seconds))
    title = args.workload + (", session log alone" if args.alone else "")
    print(report(title, stats, done, args.top))


if __name__ == "__main__":
    main()
