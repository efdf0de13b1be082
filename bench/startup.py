"""`agenthost up` from a fresh data folder to ready, and its memory once
started, beside the floor of the same machine measured in the same run: a
bare Python process that imports grpc and serves a grpc.aio server on a
loopback port (what any Python gRPC service pays before its own code).

Each round starts both, in turn (which goes first alternating): the time
runs from the spawn to the line that says it serves ("agenthost is up", or
the bare server's), the CPU is the process's own (user + system, from
/proc) at that moment, and the RSS is read once it has stood idle for
SETTLE_S (what start-up loaded in the background, e.g. the request rules,
included). The stack runs with the built-in model, every service in the
one process, SQLite in the fresh folder: what a first `agenthost up` does.
Both start with their bytecode compiled, as an installed agenthost does (pip
compiles it): into a cache folder of the run's own (PYTHONPYCACHEPREFIX,
whatever PYTHONDONTWRITEBYTECODE says here), filled by a first start of each
that is not counted."""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness import Sizes
from bench.memory import MIB, rss_bytes
from bench.ratio import Figure, Side

NAME = "startup"
# Idle after ready before the RSS is read.
SETTLE_S = 1.0
READY_TIMEOUT_S = 120.0
AGENTHOST = Path(sys.executable).with_name("agenthost")
BARE = (
    "import asyncio, grpc\n"
    "async def main():\n"
    "    server = grpc.aio.server()\n"
    "    server.add_insecure_port('127.0.0.1:0')\n"
    "    await server.start()\n"
    "    print('bare server is up', flush=True)\n"
    "    await server.wait_for_termination()\n"
    "asyncio.run(main())\n"
)


@dataclass(frozen=True)
class Start:
    ready_s: float
    cpu_s: float
    rss_mb: float


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _start(command: list[str], ready_line: str, env: dict[str, str]) -> Start:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(READY_TIMEOUT_S):
            while ready_line not in (await process.stdout.readline()).decode():
                if process.stdout.at_eof():
                    raise RuntimeError(f"{command[0]} ended before it was ready")
        ready_s = time.perf_counter() - started
        cpu_s = _cpu_s(process.pid)
        await asyncio.sleep(SETTLE_S)
        return Start(ready_s, cpu_s, rss_bytes(process.pid) / MIB)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await process.wait()


def _compiled(cache: Path) -> dict[str, str]:
    """This environment, its bytecode kept in `cache`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


async def _agenthost(data_dir: Path, cache: Path) -> Start:
    env = {k: v for k, v in _compiled(cache).items() if not k.startswith("AGENTHOST_")}
    env["AGENTHOST_DATA_DIR"] = str(data_dir)
    command = [str(AGENTHOST), "up", "--free-ports", "--data-dir", str(data_dir)]
    return await _start(command, "agenthost is up", env)


async def _bare(cache: Path) -> Start:
    return await _start([sys.executable, "-c", BARE], "bare server is up", _compiled(cache))


def _side(label: str, starts: list[Start], value: float) -> Side:
    return Side(label, value, samples=len(starts))


async def run(sizes: Sizes, data_dir: Path) -> list[Figure]:
    stack: list[Start] = []
    bare: list[Start] = []
    cache = data_dir / "pycache"
    await _agenthost(data_dir / "compile", cache)  # fills the bytecode cache
    await _bare(cache)
    for index in range(sizes.restarts):
        fresh = data_dir / f"up-{index}"  # a fresh data folder each time
        if index % 2 == 0:
            stack.append(await _agenthost(fresh, cache))
            bare.append(await _bare(cache))
        else:
            bare.append(await _bare(cache))
            stack.append(await _agenthost(fresh, cache))

    def median(starts: list[Start], field: str) -> float:
        return float(statistics.median(getattr(s, field) for s in starts))

    cpu = (
        f"CPU to ready (median): agenthost {median(stack, 'cpu_s') * 1e3:.0f} ms, "
        f"bare {median(bare, 'cpu_s') * 1e3:.0f} ms"
    )
    return [
        Figure(
            name="agenthost up on a fresh data folder: start to ready",
            compared="median",
            unit="ms",
            measured=_side("agenthost up", stack, median(stack, "ready_s") * 1e3),
            baseline=_side("bare grpc.aio server", bare, median(bare, "ready_s") * 1e3),
            target=None,
            notes=(f"{sizes.restarts} starts of each, taking turns", cpu),
            details={"agenthost_cpu_ms": median(stack, "cpu_s") * 1e3},
        ),
        Figure(
            name="agenthost up: RSS after start",
            compared="rss",
            unit="MB",
            measured=_side("agenthost up", stack, median(stack, "rss_mb")),
            baseline=_side("bare grpc.aio server", bare, median(bare, "rss_mb")),
            target=None,
            notes=(f"read {SETTLE_S:g} s after ready, idle",),
        ),
    ]
