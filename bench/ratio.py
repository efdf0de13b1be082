"""Benchmark results as ratios to a baseline measured in the same run."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Ratio:
    name: str
    measured_s: float
    baseline_s: float
    target: float

    @property
    def ratio(self) -> float:
        return self.measured_s / self.baseline_s

    @property
    def met(self) -> bool:
        return self.ratio <= self.target

    def report(self) -> str:
        verdict = "ok" if self.met else "MISSED"
        return (
            f"{self.name}: {self.measured_s * 1e6:.0f} us vs baseline "
            f"{self.baseline_s * 1e6:.0f} us = {self.ratio:.2f}x (target <= "
            f"{self.target:.1f}x) {verdict}"
        )


async def median_latency(
    call: Callable[[], Awaitable[object]], rounds: int, per_round: int
) -> float:
    """Median over rounds of the mean latency of `per_round` sequential calls."""
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(per_round):
            await call()
        samples.append((time.perf_counter() - started) / per_round)
    return statistics.median(samples)


async def interleaved(
    measured: Callable[[], Awaitable[object]],
    baseline: Callable[[], Awaitable[object]],
    rounds: int = 15,
    per_round: int = 200,
) -> tuple[float, float]:
    """Alternate rounds so both sides see the same machine load."""
    for call in (measured, baseline):  # warm up connections and caches
        for _ in range(per_round):
            await call()
    measured_samples, baseline_samples = [], []
    for _ in range(rounds):
        measured_samples.append(await median_latency(measured, 1, per_round))
        baseline_samples.append(await median_latency(baseline, 1, per_round))
    return statistics.median(measured_samples), statistics.median(baseline_samples)
