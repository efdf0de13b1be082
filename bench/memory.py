"""Resident memory of the session log service holding many sessions,
against the same service empty: reported, not judged.

The service runs as its own process (`python -m services.sessionlog`, as in
a deployment) so /proc tells its RSS alone. Growth per session is the slope
between a tenth of the sessions and all of them, which leaves out what the
first calls load once (code paths, caches that fill and stop)."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterable
from pathlib import Path

from grpc_health.v1 import health_pb2

from bench.harness import Sizes, conversation
from bench.ratio import Figure, Side
from services.common.client import open_channel
from services.common.internal_auth import TOKEN_ENV, new_token
from services.sessionlog.client import SessionLogClient
from tests.support.hosts import ServiceProcess, wait_for_health

NAME = "memory"
BUILDERS = 8  # concurrent writers filling the log
MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def _drain(lines: Iterable[bytes]) -> None:
    """Read the service's log so a full pipe never blocks it."""
    for _ in lines:
        pass


async def _fill(log: SessionLogClient, cwd: str, sessions: int, events: int) -> None:
    batch = conversation(events)[:events]
    queue = iter(range(sessions))

    async def builder() -> None:
        for _ in queue:  # shared iterator: each session built once
            summary, _ = await log.create_session(None, cwd)
            await log.append(summary.id, batch)

    await asyncio.gather(*(builder() for _ in range(BUILDERS)))


async def _measure(sizes: Sizes, data_dir: Path) -> tuple[int, int, int]:
    """RSS empty, after a tenth of the sessions, after all of them."""
    token = new_token()
    service = ServiceProcess(
        "services.sessionlog",
        data_dir,
        env={TOKEN_ENV: token, "AGENTHOST_SESSIONLOG_DSN": ""},
    )
    address = await service.start()
    assert service.process is not None and service.process.stderr is not None
    threading.Thread(target=_drain, args=(service.process.stderr,), daemon=True).start()
    channel = open_channel(address, token)
    try:
        await wait_for_health(channel, health_pb2.HealthCheckResponse.SERVING)
        log = SessionLogClient(channel)
        for _ in range(10):  # warm the call path without storing anything
            await log.list_sessions()
        pid, cwd = service.process.pid, str(data_dir)
        empty = rss_bytes(pid)
        tenth = max(sizes.memory_sessions // 10, 1)
        await _fill(log, cwd, tenth, sizes.memory_events)
        partial = rss_bytes(pid)
        await _fill(log, cwd, sizes.memory_sessions - tenth, sizes.memory_events)
        return empty, partial, rss_bytes(pid)
    finally:
        await channel.close()
        service.signal(signal.SIGTERM)
        try:
            await service.wait()
        finally:
            service.kill()


async def run(sizes: Sizes, data_dir: Path) -> Figure:
    empty, partial, full = await _measure(sizes, data_dir)
    tenth = max(sizes.memory_sessions // 10, 1)
    growth = (full - partial) / max(sizes.memory_sessions - tenth, 1)
    overall = (full - empty) / sizes.memory_sessions
    shape = f"{sizes.memory_sessions} sessions x {sizes.memory_events} events"
    return Figure(
        name=f"session log resident memory, {shape}",
        compared="rss",
        unit="MiB",
        measured=Side(f"RSS holding {shape}", full / MIB),
        baseline=Side("RSS of the same service empty", empty / MIB),
        target=None,
        notes=(
            f"growth per session: {growth / 1024:.2f} KiB (slope from {tenth} to "
            f"{sizes.memory_sessions} sessions), {overall / 1024:.2f} KiB from empty",
            "the service alone in its own process, SQLite store",
        ),
        details={
            "growth_per_session_bytes": growth,
            "growth_per_session_from_empty_bytes": overall,
            "rss_after_tenth_bytes": float(partial),
        },
    )
