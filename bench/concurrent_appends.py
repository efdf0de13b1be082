"""16 concurrent durable single-event appenders to the session log service,
events/s, against bare echo calls/s at the same concurrency: to the session
log alone, and to the embedded stack's (whose followers share its loop).

Each appender writes its own session, one event per call, through the
session log's gRPC as the embedded stack runs it (SessionLogClient, the
internal token): every acknowledged append is fsynced, so this is what
concurrent writers get from the log's commits."""

from __future__ import annotations

from pathlib import Path

from bench.harness import (
    AppendRates,
    Sizes,
    conversation,
    echo_server,
    running_stack,
    session_log_alone,
)
from bench.ratio import Figure, Round, interleaved_rate_sides, rate_side, run_for
from services.sessionlog.client import SessionLogClient

NAME = "concurrent_appends"


async def appenders(log: SessionLogClient, cwd: Path, sizes: Sizes) -> Round:
    sessions = []
    for _ in range(sizes.appenders):
        summary, _ = await log.create_session(None, str(cwd))
        sessions.append(summary.id)
    events = conversation(4)  # cycled, one event per call

    async def append(index: int) -> int:
        await log.append(sessions[index], [events[appended[index] % len(events)]])
        appended[index] += 1
        return 1

    appended = [0] * sizes.appenders
    return lambda seconds: run_for(seconds, sizes.appenders, append)


async def run(sizes: Sizes, data_dir: Path) -> list[Figure]:
    async with (
        running_stack(data_dir / "stack") as stack,
        session_log_alone(data_dir / "alone") as alone,
        echo_server() as echo,
    ):
        payload = conversation(1)[1].SerializeToString()

        async def one_echo(index: int) -> int:
            await echo(payload)
            return 1

        through_stack, baseline, by_itself = await interleaved_rate_sides(
            [
                await appenders(stack.log, stack.workdir, sizes),
                lambda seconds: run_for(seconds, sizes.appenders, one_echo),
                await appenders(alone, data_dir, sizes),
            ],
            sizes.rate_rounds,
            sizes.rate_round_s,
        )
    return AppendRates(
        name=f"{sizes.appenders} concurrent durable single-event appenders",
        appends="session log Append, 1 event per call, own session each",
        alone=by_itself,
        in_stack=through_stack,
        baseline=rate_side(f"bare echo unary, concurrency {sizes.appenders}", baseline),
    ).figures(0.3, 0.25)
