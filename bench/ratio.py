"""Benchmark figures: what was measured, its baseline from the same run, and
the ratio between them, checked against a target; plus the two ways we
measure (latency per call, rate over a time window), each interleaving the
measured side with its baseline so both see the same machine load."""

from __future__ import annotations

import asyncio
import math
import operator
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

Op = Literal["<=", ">="]
_OPS: dict[Op, Callable[[float, float], bool]] = {"<=": operator.le, ">=": operator.ge}


@dataclass(frozen=True)
class Side:
    """One side of a figure. `value` is the statistic the figure compares
    (named by Figure.compared), in the figure's unit; p50/p99 are per-call
    latencies in ms when known (rate figures have them too)."""

    label: str
    value: float
    p50_ms: float | None = None
    p99_ms: float | None = None
    samples: int = 0


@dataclass(frozen=True)
class Target:
    """measured/baseline `op` ratio, and optionally measured `op` absolute,
    and measured - baseline `op` overhead (a cost added to the baseline's,
    e.g. what a sandbox adds to a command; math.inf ratio: that one only)."""

    op: Op
    ratio: float
    absolute: float | None = None
    overhead: float | None = None

    def describe(self, unit: str) -> str:
        parts = [] if math.isinf(self.ratio) else [f"{self.op} {self.ratio:g}x"]
        if self.absolute is not None:
            parts.append(f"{self.op} {self.absolute:g} {unit}")
        if self.overhead is not None:
            parts.append(f"baseline + {self.op} {self.overhead:g} {unit}")
        return " and ".join(parts)


@dataclass(frozen=True)
class Figure:
    name: str
    # Which statistic `value` is on both sides: "p50", "p99", "rate", "rss".
    compared: str
    unit: str
    measured: Side
    baseline: Side
    # None: reported only, never a pass or a miss.
    target: Target | None
    notes: Sequence[str] = ()
    details: dict[str, float] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.measured.value / self.baseline.value if self.baseline.value else math.inf

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        check = _OPS[self.target.op]
        if not check(self.ratio, self.target.ratio):
            return False
        overhead = self.target.overhead
        if overhead is not None and not check(self.measured.value - self.baseline.value, overhead):
            return False
        return self.target.absolute is None or check(self.measured.value, self.target.absolute)


# -- statistics ----------------------------------------------------------------------------------


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): always one of the samples."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    return ordered[max(math.ceil(q / 100 * len(ordered)) - 1, 0)]


def latency_side(label: str, samples_s: Sequence[float], compared: str) -> Side:
    p50, p99 = percentile(samples_s, 50) * 1e3, percentile(samples_s, 99) * 1e3
    return Side(label, p50 if compared == "p50" else p99, p50, p99, len(samples_s))


# -- latency: sequential calls, interleaved rounds ---------------------------------------------

Call = Callable[[], Awaitable[object]]


async def timed_calls(call: Call, count: int) -> list[float]:
    """Latencies (s) of `count` sequential calls."""
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        await call()
        latencies.append(time.perf_counter() - started)
    return latencies


async def interleaved(
    measured: Call, baseline: Call, rounds: int, per_round: int
) -> tuple[list[float], list[float]]:
    """Per-call latencies of both sides, alternating rounds (and which side
    goes first) so both see the same load; one round of each warms up."""
    measured_s, baseline_s = await interleaved_sides([measured, baseline], rounds, per_round)
    return measured_s, baseline_s


async def interleaved_sides(
    calls: Sequence[Call], rounds: int, per_round: int
) -> list[list[float]]:
    """Per-call latencies of each call, one round of each in turn, the order
    rotating every round so each goes first as often; one round of each
    warms up."""
    for call in calls:
        await timed_calls(call, per_round)
    latencies: list[list[float]] = [[] for _ in calls]
    for index in range(rounds):
        for offset in range(len(calls)):
            side = (index + offset) % len(calls)
            latencies[side].extend(await timed_calls(calls[side], per_round))
    return latencies


# -- rate: work done over a time window --------------------------------------------------------


@dataclass
class RoundResult:
    items: int = 0
    elapsed_s: float = 0.0
    latencies_s: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.items / self.elapsed_s if self.elapsed_s else 0.0


# A round runs for the given seconds and says what it got done.
Round = Callable[[float], Awaitable[RoundResult]]
# One unit of work of a worker (its index): returns the items it did.
Work = Callable[[int], Awaitable[int]]


async def run_for(duration_s: float, workers: int, work: Work) -> RoundResult:
    """`workers` concurrent loops of `work` until the window closes; calls
    still running then are waited for and counted."""
    result = RoundResult()
    deadline = time.perf_counter() + duration_s

    async def worker(index: int) -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            done = await work(index)  # not `items += await`: that reads items before
            result.items += done
            result.latencies_s.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(workers)))
    result.elapsed_s = time.perf_counter() - started
    return result


async def interleaved_rates(
    measured: Round, baseline: Round, rounds: int, duration_s: float
) -> tuple[list[RoundResult], list[RoundResult]]:
    """Alternating rounds of both sides after a short warm-up of each."""
    measured_rounds, baseline_rounds = await interleaved_rate_sides(
        [measured, baseline], rounds, duration_s
    )
    return measured_rounds, baseline_rounds


async def interleaved_rate_sides(
    sides: Sequence[Round], rounds: int, duration_s: float
) -> list[list[RoundResult]]:
    """One round of each side in turn, the order rotating every round so
    each goes first as often, after a short warm-up of each."""
    for side in sides:
        await side(duration_s / 4)
    results: list[list[RoundResult]] = [[] for _ in sides]
    for index in range(rounds):
        for offset in range(len(sides)):
            which = (index + offset) % len(sides)
            results[which].append(await sides[which](duration_s))
    return results


def median_rate(rounds: Sequence[RoundResult]) -> float:
    return statistics.median(r.rate for r in rounds)


def rate_side(label: str, rounds: Sequence[RoundResult]) -> Side:
    """The median round's rate, with per-call latencies over every round."""
    latencies = [x for r in rounds for x in r.latencies_s]
    return Side(
        label,
        median_rate(rounds),
        percentile(latencies, 50) * 1e3,
        percentile(latencies, 99) * 1e3,
        len(latencies),
    )
