"""The bench report: the machine it ran on and every figure, as markdown
(for people) and JSON (for comparing runs)."""

from __future__ import annotations

import gc
import json
import os
import platform
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google import protobuf

from bench.ratio import Figure, Side


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mount_of(path: Path) -> tuple[str, str, str]:
    """(device, mount point, filesystem type) holding `path`."""
    best = ("?", "/", "?")
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return best
    resolved = str(path.resolve())
    for line in mounts:
        device, point, fstype, *_ = line.split()
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[1]):
            best = (device, point, fstype)
    return best


def _git_commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


# Steps of the Python-speed probe, and how many times it is timed.
PROBE_STEPS = 200_000
PROBE_REPEATS = 5


def _python_step_ns() -> float:
    """Nanoseconds per step of plain interpreted work (a call, an object, a
    dict and a list touched), the best of a few timings. The baselines are
    mostly C (grpc's core, SQLite), the figures mostly Python, so a ratio
    moves with how fast this machine runs Python against C: this says how
    fast it ran Python, for comparing runs made on different machines.
    The collector is off while it runs: the steps keep what they make, and
    in this process's large heap its collections would be most of the time
    (about 700 ns a step against 340 without)."""

    class Item:
        __slots__ = ("key", "value")

        def __init__(self, key: int, value: int) -> None:
            self.key, self.value = key, value

    def step(index: dict[int, Item], kept: list[Item], n: int) -> None:
        item = Item(n & 1023, n)
        index[item.key] = item
        kept.append(index.get(n & 511, item))

    best = float("inf")
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(PROBE_REPEATS):
            index: dict[int, Item] = {}
            kept: list[Item] = []
            started = time.perf_counter_ns()
            for n in range(PROBE_STEPS):
                step(index, kept, n)
            best = min(best, (time.perf_counter_ns() - started) / PROBE_STEPS)
    finally:
        if collecting:
            gc.enable()
    return best


def machine(data_dir: Path) -> dict[str, str]:
    device, point, fstype = _mount_of(data_dir)
    free = shutil.disk_usage(data_dir).free
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return {
        "cpus": str(os.cpu_count()),
        "cpus usable": str(len(os.sched_getaffinity(0))),
        "cpu model": _cpu_model(),
        "python": platform.python_version(),
        "grpcio": grpc.__version__,
        "protobuf": protobuf.__version__,
        "data dir": str(data_dir),
        "data disk": f"{device} on {point} ({fstype}), {free / 1e9:.0f} GB free",
        "load average at start": load,
        "python speed": f"{_python_step_ns():.0f} ns per probe step (lower is faster)",
        "commit": _git_commit(),
    }


@dataclass
class Report:
    mode: str  # "full" or "smoke"
    machine: dict[str, str]
    figures: list[Figure] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    duration_s: float = 0.0

    @property
    def missed(self) -> list[Figure]:
        return [f for f in self.figures if f.met is False]

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "machine": self.machine,
            "duration_s": round(self.duration_s, 1),
            "figures": [_figure_json(f) for f in self.figures],
            "errors": self.errors,
        }

    def markdown(self) -> str:
        lines = [f"# agenthost bench ({self.mode})", ""]
        if self.mode == "smoke":
            lines += ["Smoke run: tiny sizes, guards not enforced.", ""]
        lines += ["| machine | |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in self.machine.items()]
        lines += ["", *_figure_table(self.figures), "", *_notes(self.figures)]
        if self.errors:
            lines += ["", "## Errors", ""]
            lines += [f"- **{name}**: {error}" for name, error in self.errors.items()]
        lines += ["", f"Run took {self.duration_s:.0f} s. {self._verdict()}"]
        return "\n".join(lines) + "\n"

    def _verdict(self) -> str:
        judged = [f for f in self.figures if f.met is not None]
        met = sum(1 for f in judged if f.met)
        return f"Regression guards met: {met} of {len(judged)}."

    def write(self, out_dir: Path) -> tuple[Path, Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        markdown, data = out_dir / "report.md", out_dir / "report.json"
        markdown.write_text(self.markdown())
        data.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return markdown, data


def _figure_json(figure: Figure) -> dict[str, Any]:
    return {
        "name": figure.name,
        "compared": figure.compared,
        "unit": figure.unit,
        "measured": asdict(figure.measured),
        "baseline": asdict(figure.baseline),
        "ratio": figure.ratio,
        "target": None if figure.target is None else asdict(figure.target),
        "met": figure.met,
        "notes": list(figure.notes),
        "details": figure.details,
    }


def _number(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"


def _side(side: Side, figure: Figure) -> str:
    text = f"{_number(side.value)} {figure.unit}"
    if figure.compared == "rate" and side.p50_ms is not None and side.p99_ms is not None:
        text += f" (call p50 {_number(side.p50_ms)} / p99 {_number(side.p99_ms)} ms)"
    elif side.p50_ms is not None and side.p99_ms is not None:
        text = f"p50 {_number(side.p50_ms)} / p99 {_number(side.p99_ms)} ms"
    return f"{side.label}: {text}"


def _result(figure: Figure) -> str:
    return {None: "report only", True: "met", False: "**MISSED**"}[figure.met]


def _figure_table(figures: list[Figure]) -> list[str]:
    lines = [
        "| figure | compared | measured | baseline (same run) | ratio | guard | result |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in figures:
        target = "-" if f.target is None else f.target.describe(f.unit)
        lines.append(
            f"| {f.name} | {f.compared} | {_side(f.measured, f)} | {_side(f.baseline, f)} "
            f"| {f.ratio:.2f}x | {target} | {_result(f)} |"
        )
    return lines


def _notes(figures: list[Figure]) -> list[str]:
    lines = ["Notes:", ""]
    for f in figures:
        lines += [f"- {f.name}: {note}" for note in f.notes]
    return lines if len(lines) > 2 else []
