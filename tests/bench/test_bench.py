"""The bench's own logic: what passes or misses a target, how rates are
counted, and one real figure end to end. CI also runs every figure at tiny
sizes (`make bench-smoke`); these are the cheap checks of what decides."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bench import plan_mode_read
from bench.harness import SMOKE
from bench.ratio import Call, Figure, Side, Target, interleaved_sides, percentile, run_for
from bench.report import Report, machine


def figure(measured: float, baseline: float, target: Target | None) -> Figure:
    return Figure("f", "p50", "ms", Side("m", measured, 1.0, 2.0, 10), Side("b", baseline), target)


def test_a_latency_target_is_a_ceiling_on_the_ratio_and_on_the_absolute() -> None:
    assert figure(3.0, 2.0, Target("<=", 1.5)).met is True
    assert figure(3.1, 2.0, Target("<=", 1.5)).met is False
    assert figure(30.0, 20.0, Target("<=", 2.0, absolute=20.0)).met is False


def test_a_rate_target_is_a_floor_and_no_target_is_reported_only() -> None:
    assert figure(80.0, 100.0, Target(">=", 0.8)).met is True
    assert figure(79.0, 100.0, Target(">=", 0.8)).met is False
    assert figure(1.0, 1.0, None).met is None


def test_percentiles_are_nearest_rank() -> None:
    samples = [float(x) for x in range(1, 101)]
    assert (percentile(samples, 50), percentile(samples, 99)) == (50.0, 99.0)
    assert percentile([7.0], 99) == 7.0


async def test_concurrent_workers_count_every_item() -> None:
    calls = 0

    async def work(index: int) -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        return 2

    result = await run_for(0.05, 8, work)
    assert result.items == 2 * calls == 2 * len(result.latencies_s)


async def test_interleaved_sides_take_turns_going_first() -> None:
    order: list[str] = []

    def side(name: str) -> Call:
        async def call() -> None:
            order.append(name)

        return call

    latencies = await interleaved_sides([side("a"), side("b"), side("c")], rounds=3, per_round=1)
    assert [len(side) for side in latencies] == [3, 3, 3]
    warm_up, rounds = order[:3], order[3:]
    assert warm_up == ["a", "b", "c"]
    assert [rounds[i] for i in (0, 3, 6)] == ["a", "b", "c"]  # each goes first once


async def test_a_figure_runs_on_the_stack_and_reports(tmp_path: Path) -> None:
    result = await plan_mode_read.run(SMOKE, tmp_path / "data")
    assert result.measured.samples == result.baseline.samples == SMOKE.rounds * SMOKE.per_round
    report = Report("smoke", machine(tmp_path), [result, figure(1.0, 1.0, None)])
    markdown, data = report.write(tmp_path / "out")
    assert "gateway PlanMode read" in markdown.read_text()
    written = json.loads(data.read_text())
    assert written["figures"][0]["met"] == result.met
    assert written["machine"]["cpus"]
    # How fast this machine ran Python, to compare runs across machines.
    assert "ns per probe step" in written["machine"]["python speed"]
