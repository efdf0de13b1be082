"""Concurrent durable appends to the session log, measured by hand (not a test).

    .venv/bin/python -m tools.measure_appends               # SQLite in a temp dir
    .venv/bin/python -m tools.measure_appends --postgres    # the test PostgreSQL

Each of --writers appenders sends --appends single-event batches, one after
the other, to its own session through the domain (as the service does), and
the script prints appends per second and how many transactions the store ran
(when the store counts them). Numbers depend on the disk's fsync latency and
on what else the machine runs; compare runs made back to back.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

from services.sessionlog.domain import SessionLog
from services.sessionlog.postgres_store import PostgresSessionStore
from services.sessionlog.sqlite_store import SqliteSessionStore
from services.sessionlog.store import SessionStore
from tests.support.events import user
from tests.support.postgres import POSTGRES_DSN, drop_schema


async def _appender(log: SessionLog, worker: int, appends: int) -> None:
    session_id = f"w{worker}"
    await log.create_session(session_id, "/w")
    for n in range(appends):
        await log.append(session_id, [user(f"{worker}-{n}")])


async def _measure(store: SessionStore, writers: int, appends: int) -> None:
    await store.open()
    try:
        log = SessionLog(store)
        started = time.perf_counter()
        await asyncio.gather(*(_appender(log, w, appends) for w in range(writers)))
        elapsed = time.perf_counter() - started
    finally:
        await store.close()
    total = writers * appends
    stats = getattr(store, "stats", None)
    transactions = getattr(stats, "transactions", "not counted")
    print(
        f"{type(store).__name__}: {writers} writers x {appends} appends = {total} "
        f"in {elapsed:.2f}s: {total / elapsed:.0f} appends/s, "
        f"{elapsed / appends * 1000:.2f} ms per append each writer waits, "
        f"transactions: {transactions}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--appends", type=int, default=50)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    if args.postgres:
        store = PostgresSessionStore(POSTGRES_DSN, f"measure_{uuid.uuid4().hex[:8]}")
        try:
            await _measure(store, args.writers, args.appends)
        finally:
            await drop_schema(store)
        return
    with tempfile.TemporaryDirectory() as folder:
        await _measure(SqliteSessionStore(Path(folder) / "log.db"), args.writers, args.appends)


if __name__ == "__main__":
    asyncio.run(main())
