"""`make bench-peers` (`python -m bench.peers`): agenthost beside `opencode
serve` and `codex app-server`, each driven through its long-lived API
against the same fake model (bench/peers/fake_model.py), one host at a
time, each measured as its whole process tree (CPU time from /proc,
including its reaped children's, such as the shell commands; RSS and PSS).

A turn: the model calls the host's shell tool once (`echo bench`), then
answers in 300 text chunks, sent at once (burst) or 5 ms apart (paced).
Figures, per host:

- start to ready: spawn until the API answers (median of `starts`);
- RSS and PSS after start (1 s after ready);
- host overhead per turn, p50 (burst): the turn's time at the client less
  the time the fake model spent answering its requests;
- host CPU per turn, burst and paced;
- RSS and PSS after those turns and `short_sessions` sessions of one turn;
- `concurrent` sessions x `concurrent_turns` turns at once: wall and CPU;
- many sessions at a real pace (a run of its own, fresh host): `many`
  sessions prompted at once, chunks 20 ms apart, every session's live text
  read by the client: the delay from the fake model writing a chunk to the
  client reading it (p50, p99) and the host's CPU. agenthost and Codex
  only (opencode's memory and CPU at 10 sessions already rule it out).

Writes build/bench/peers.md and peers.json and prints the table. Run it
offline: `make bench-peers` runs it in a network namespace with only
loopback (the fake model inside it too); the report says whether it was."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.peers.fake_model import sent_stamps
from bench.peers.hosts import REPO, Host, make, versions
from bench.processes import tree
from bench.ratio import percentile
from bench.report import machine

HOST_NAMES = ("agenthost", "opencode", "codex")
MANY_HOSTS = ("agenthost", "codex")


@dataclass(frozen=True)
class Sizes:
    starts: int  # starts timed before the one measured (0: that one's time)
    turns: int
    paced_turns: int
    short_sessions: int
    concurrent: int
    concurrent_turns: int
    many: int
    many_chunks: int
    chunks: int = 300
    pace_ms: float = 5.0
    many_pace_ms: float = 20.0


FULL = Sizes(
    starts=3,
    turns=20,
    paced_turns=10,
    short_sessions=50,
    concurrent=10,
    concurrent_turns=5,
    many=200,
    many_chunks=100,
)
SMOKE = Sizes(
    starts=1,
    turns=2,
    paced_turns=1,
    short_sessions=2,
    concurrent=2,
    concurrent_turns=2,
    many=4,
    many_chunks=10,
)


# -- a process tree, from /proc ---------------------------------------------------------


def tree_cpu_s(root: int) -> float:
    """CPU time of a process tree: user + system of each live process, plus
    what its reaped children used (so commands that came and went count)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return total / ticks


def tree_memory_mb(root: int) -> tuple[float, float]:
    """(RSS, PSS) of a process tree in MiB, from smaps_rollup."""
    rss = pss = 0
    for pid in tree(root):
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in rollup.splitlines():
            key, _, rest = line.partition(":")
            if key == "Rss":
                rss += int(rest.split()[0])
            elif key == "Pss":
                pss += int(rest.split()[0])
    return rss / 1024, pss / 1024


# -- the fake model, in its own process -------------------------------------------------


@dataclass
class Model:
    process: asyncio.subprocess.Process
    url: str  # base, without /v1
    http: aiohttp.ClientSession

    @classmethod
    async def start(cls) -> Model:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.peers.fake_model",
            stdout=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
            cwd=REPO,
        )
        assert process.stdout is not None
        async with asyncio.timeout(30):
            port = json.loads(await process.stdout.readline())["port"]
        return cls(process, f"http://127.0.0.1:{port}", aiohttp.ClientSession())

    async def script(self, **changes: Any) -> None:
        async with self.http.post(f"{self.url}/bench/script", json=changes) as response:
            response.raise_for_status()

    async def busy_s(self) -> float:
        async with self.http.get(f"{self.url}/bench/stats") as response:
            return float((await response.json())["busy_s"])

    async def stop(self) -> None:
        await self.http.close()
        self.process.terminate()
        await self.process.wait()


# -- the figures ------------------------------------------------------------------------


@dataclass
class Result:
    host: str
    figures: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


async def _host(name: str, root: Path, model: Model, label: str) -> Host:
    host = make(name, root / f"{name}-{label}", f"{model.url}/v1")
    await host.start()
    return host


async def measure(name: str, root: Path, model: Model, sizes: Sizes) -> Result:
    result = Result(name)
    figures = result.figures
    await model.script(chunks=sizes.chunks, pace_ms=0)
    starts = []
    for attempt in range(sizes.starts):
        host = await _host(name, root, model, f"start{attempt}")
        starts.append(host.ready_s)
        await host.stop()

    host = await _host(name, root, model, "main")
    figures["start_s"] = statistics.median(starts or [host.ready_s])
    try:
        await asyncio.sleep(1.0)  # settle: what it holds once started, not while starting
        figures["rss_start_mb"], figures["pss_start_mb"] = tree_memory_mb(host.pid)
        session = await host.new_session()
        await host.turn(session)  # warm-up: first-use costs stay out of the per-turn figures

        overheads = []
        cpu_before = tree_cpu_s(host.pid)
        for _ in range(sizes.turns):
            busy_before, began = await model.busy_s(), time.perf_counter()
            await host.turn(session)
            wall = time.perf_counter() - began
            overheads.append(wall - (await model.busy_s() - busy_before))
        figures["cpu_turn_burst_ms"] = (tree_cpu_s(host.pid) - cpu_before) / sizes.turns * 1e3
        figures["overhead_p50_ms"] = percentile(overheads, 50) * 1e3

        await model.script(pace_ms=sizes.pace_ms)
        cpu_before = tree_cpu_s(host.pid)
        for _ in range(sizes.paced_turns):
            await host.turn(session)
        figures["cpu_turn_paced_ms"] = (tree_cpu_s(host.pid) - cpu_before) / sizes.paced_turns * 1e3
        await model.script(pace_ms=0)

        for _ in range(sizes.short_sessions):
            await host.turn(await host.new_session())
        figures["rss_used_mb"], figures["pss_used_mb"] = tree_memory_mb(host.pid)

        sessions = [await host.new_session() for _ in range(sizes.concurrent)]

        async def turns(session: str) -> None:
            for _ in range(sizes.concurrent_turns):
                await host.turn(session)

        cpu_before, began = tree_cpu_s(host.pid), time.perf_counter()
        await asyncio.gather(*(turns(s) for s in sessions))
        figures["concurrent_wall_s"] = time.perf_counter() - began
        figures["concurrent_cpu_s"] = tree_cpu_s(host.pid) - cpu_before
    finally:
        await host.stop()
    return result


async def measure_many(name: str, root: Path, model: Model, sizes: Sizes) -> dict[str, float]:
    """`many` sessions prompted at once, chunks `many_pace_ms` apart, every
    chunk's delay from the model's write to the client's read."""
    await model.script(chunks=sizes.many_chunks, pace_ms=0)
    host = await _host(name, root, model, "many")
    try:
        sessions = [await host.new_session() for _ in range(sizes.many)]
        for session in sessions[:2]:
            await host.turn(session)  # warm-up
        await model.script(pace_ms=sizes.many_pace_ms)
        delays: list[float] = []

        def receiver(text: str) -> None:
            now = time.perf_counter()
            delays.extend(now - sent for sent in sent_stamps(text))

        cpu_before, began = tree_cpu_s(host.pid), time.perf_counter()
        ours_before = tree_cpu_s(model.process.pid) + time.process_time()
        await asyncio.gather(*(host.turn(s, receiver) for s in sessions))
        wall = time.perf_counter() - began
        cpu = tree_cpu_s(host.pid) - cpu_before
        ours = tree_cpu_s(model.process.pid) + time.process_time() - ours_before
    finally:
        await host.stop()
        await model.script(chunks=sizes.chunks, pace_ms=0)
    retries = getattr(host, "retries", 0)
    expected = sizes.many * sizes.many_chunks
    return {
        "many_p50_ms": percentile(delays, 50) * 1e3,
        "many_p99_ms": percentile(delays, 99) * 1e3,
        "many_cpu_s": cpu,
        "many_wall_s": wall,
        "many_bench_cpu_s": ours,
        "many_chunks_seen": len(delays) / expected,
        "many_retries": retries,
    }


# -- the report -------------------------------------------------------------------------

# key, label, unit, format
ROWS: list[tuple[str, str, str]] = [
    ("overhead_p50_ms", "host overhead per turn, p50 (chunks sent at once)", "ms"),
    ("cpu_turn_burst_ms", "host CPU per turn (chunks sent at once)", "ms"),
    ("cpu_turn_paced_ms", "host CPU per turn, chunks paced 5 ms apart", "ms"),
    ("rss_start_mb", "memory after start, RSS", "MB"),
    ("pss_start_mb", "memory after start, PSS", "MB"),
    ("rss_used_mb", "memory after {turns} turns + {short} short sessions, RSS", "MB"),
    ("pss_used_mb", "memory after {turns} turns + {short} short sessions, PSS", "MB"),
    ("start_s", "start to ready", "s"),
    ("concurrent_wall_s", "{conc} sessions x {conc_turns} turns at once: wall", "s"),
    ("concurrent_cpu_s", "{conc} sessions x {conc_turns} turns at once: host CPU", "s"),
    ("many_p50_ms", "{many} sessions streaming, chunks 20 ms apart: chunk delay p50", "ms"),
    ("many_p99_ms", "{many} sessions streaming, chunks 20 ms apart: chunk delay p99", "ms"),
    ("many_cpu_s", "{many} sessions streaming: host CPU", "s"),
    (
        "many_wall_s",
        "{many} sessions streaming: wall (the model's pace alone: {many_ideal} s)",
        "s",
    ),
    ("many_bench_cpu_s", "{many} sessions streaming: the bench's CPU (fake model + client)", "s"),
]


def _value(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.2f} s"
    return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"


def table(results: dict[str, Result], sizes: Sizes) -> str:
    hosts = [h for h in HOST_NAMES if h in results]
    peers = [h for h in hosts if h != "agenthost"]
    ours = results.get("agenthost")
    head = ["figure", *(f"{h} ({VERSIONS.get(h, '')})" if h != "agenthost" else h for h in hosts)]
    head += [f"agenthost / {p}" for p in peers if ours is not None]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    names = {
        "turns": sizes.turns,
        "short": sizes.short_sessions,
        "conc": sizes.concurrent,
        "conc_turns": sizes.concurrent_turns,
        "many": sizes.many,
        "many_ideal": f"{sizes.many_chunks * sizes.many_pace_ms / 1e3:g}",
    }
    for key, label, unit in ROWS:
        if not any(key in results[h].figures for h in hosts):
            continue
        cells = [label.format(**names)]
        for host in hosts:
            value = results[host].figures.get(key)
            cells.append("-" if value is None else _value(value, unit))
        if ours is not None:
            for peer in peers:
                mine, theirs = ours.figures.get(key), results[peer].figures.get(key)
                cells.append("-" if mine is None or not theirs else f"{mine / theirs:.2f}x")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


VERSIONS: dict[str, str] = {}


def offline() -> bool:
    """Whether this process sees no network interface but loopback."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]


async def run(hosts: list[str], many: list[str], sizes: Sizes, out: Path) -> dict[str, Result]:
    results: dict[str, Result] = {}
    root = Path(tempfile.mkdtemp(prefix="peers-", dir=out))
    model = await Model.start()
    try:
        for name in hosts:
            print(f"bench-peers: {name} ...", file=sys.stderr, flush=True)
            began = time.perf_counter()
            load = os.getloadavg()[0]
            try:
                results[name] = await measure(name, root, model, sizes)
            except Exception as error:  # one host failing must not hide the others' figures
                traceback.print_exc()
                results[name] = Result(name, notes=[f"FAILED: {type(error).__name__}: {error}"])
            results[name].notes.append(f"load average at its start {load:.2f}")
            print(f"bench-peers: {name} took {time.perf_counter() - began:.0f} s", file=sys.stderr)
        for name in many:
            print(f"bench-peers: {name}, {sizes.many} sessions ...", file=sys.stderr, flush=True)
            load = os.getloadavg()[0]
            result = results.setdefault(name, Result(name))
            try:
                result.figures.update(await measure_many(name, root, model, sizes))
            except Exception as error:
                traceback.print_exc()
                result.notes.append(
                    f"{sizes.many} sessions FAILED: {type(error).__name__}: {error}"
                )
            result.notes.append(f"load average at its many-sessions start {load:.2f}")
            if result.figures.get("many_retries"):
                retried = int(result.figures["many_retries"])
                result.notes.append(f"{retried} requests refused as overloaded and sent again")
    finally:
        await model.stop()
        if any("FAILED" in note for result in results.values() for note in result.notes):
            print(f"bench-peers: the hosts' folders are kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes")
    parser.add_argument(
        "--hosts", nargs="*", choices=HOST_NAMES, default=list(HOST_NAMES), help="hosts measured"
    )
    parser.add_argument(
        "--many", nargs="*", choices=MANY_HOSTS, default=None, help="hosts of the many-sessions run"
    )
    parser.add_argument("--out", type=Path, default=REPO / "build" / "bench")
    args = parser.parse_args()
    sizes = SMOKE if args.smoke else FULL
    many = list(MANY_HOSTS) if args.many is None else args.many
    args.out.mkdir(parents=True, exist_ok=True)
    VERSIONS.update(versions())
    isolated = offline()
    about = machine(args.out)
    # Absolute: the hosts' sessions are made with folders under it as their cwd.
    results = asyncio.run(run(args.hosts, many, sizes, args.out.resolve()))
    markdown = "\n".join(
        [
            "# agenthost beside its peers (`make bench-peers`)",
            "",
            f"mode: {'smoke' if args.smoke else 'full'}; offline (loopback only): "
            f"{'yes' if isolated else 'NO'}; versions: "
            + ", ".join(f"{k} {v}" for k, v in VERSIONS.items()),
            "",
            *(f"- {k}: {v}" for k, v in about.items()),
            "",
            table(results, sizes),
            "",
            *(f"- {r.host}: {'; '.join(r.notes)}" for r in results.values() if r.notes),
            "",
        ]
    )
    (args.out / "peers.md").write_text(markdown)
    data = {
        "mode": "smoke" if args.smoke else "full",
        "offline": isolated,
        "versions": VERSIONS,
        "machine": about,
        "results": {name: {"figures": r.figures, "notes": r.notes} for name, r in results.items()},
    }
    (args.out / "peers.json").write_text(json.dumps(data, indent=2))
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
