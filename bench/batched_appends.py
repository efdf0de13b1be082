"""Batched appends (100 events per call) through the session log service's
gRPC as the embedded stack runs it, events/s, against bare SQLite 100-row
transactions on the same disk with the same durability (WAL,
synchronous=FULL) and the same table shape: the floor a SQLite-backed log
can reach, so the ratio is what the service adds to its storage."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from pathlib import Path

from bench.harness import AppendRates, Sizes, conversation, running_stack, session_log_alone
from bench.ratio import (
    Figure,
    Round,
    RoundResult,
    interleaved_rate_sides,
    rate_side,
    run_for,
)
from services.sessionlog.client import SessionLogClient

NAME = "batched_appends"
MESSAGE_KINDS = ("user_message", "assistant_message")  # rows flagged is_message

# The session log's tables as its SQLite store lays them out (kept here, not
# imported, so the baseline stays put while the store evolves).
SCHEMA = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, cwd TEXT NOT NULL, created_at_us INTEGER NOT NULL,
    updated_at_us INTEGER NOT NULL, last_seq INTEGER NOT NULL, blank INTEGER NOT NULL,
    title TEXT NOT NULL DEFAULT '', forked_from TEXT NOT NULL DEFAULT '',
    preview TEXT NOT NULL DEFAULT '', running INTEGER NOT NULL DEFAULT 0,
    waiting TEXT NOT NULL DEFAULT ''
);
CREATE INDEX sessions_by_update ON sessions (updated_at_us DESC, id);
CREATE TABLE events (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    seq INTEGER NOT NULL, event_id TEXT NOT NULL, kind TEXT NOT NULL,
    is_message INTEGER NOT NULL, body BLOB NOT NULL,
    UNIQUE (session_id, seq), UNIQUE (session_id, event_id)
);
CREATE INDEX events_messages ON events (session_id, is_message, seq);
"""


class SqliteBaseline:
    """One writer committing `batch` rows (plus the session row's update) per
    transaction, as the log's store does for one append."""

    def __init__(self, path: Path, batch: int) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        self.db.execute("INSERT INTO sessions VALUES ('s', '/', 0, 0, -1, 1, '', '', '', 0, '')")
        self.bodies = [
            (str(e.WhichOneof("body")), e.SerializeToString()) for e in conversation(batch)
        ]
        self.next_seq = 0

    def transaction(self) -> None:
        first, self.next_seq = self.next_seq, self.next_seq + len(self.bodies)
        rows = [
            ("s", first + i, uuid.uuid4().hex, kind, int(kind in MESSAGE_KINDS), body)
            for i, (kind, body) in enumerate(self.bodies)
        ]
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany(
            "INSERT INTO events (session_id, seq, event_id, kind, is_message, body) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        self.db.execute(
            "UPDATE sessions SET last_seq = ?, updated_at_us = ? WHERE id = 's'",
            (self.next_seq - 1, time.time_ns() // 1000),
        )
        self.db.execute("COMMIT")

    def round(self, seconds: float) -> RoundResult:
        result = RoundResult()
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            call_started = time.perf_counter()
            self.transaction()
            result.latencies_s.append(time.perf_counter() - call_started)
            result.items += len(self.bodies)
        result.elapsed_s = time.perf_counter() - started
        return result


async def appender(log: SessionLogClient, cwd: Path, batch: int) -> Round:
    summary, _ = await log.create_session(None, str(cwd))
    events = conversation(batch)

    async def append(index: int) -> int:
        await log.append(summary.id, events)
        return len(events)

    return lambda seconds: run_for(seconds, 1, append)


async def run(sizes: Sizes, data_dir: Path) -> list[Figure]:
    baseline_db = SqliteBaseline(data_dir / "baseline.db", sizes.batch)
    try:
        async with (
            running_stack(data_dir / "stack") as stack,
            session_log_alone(data_dir / "alone") as alone,
        ):
            through_stack, baseline, by_itself = await interleaved_rate_sides(
                [
                    await appender(stack.log, stack.workdir, sizes.batch),
                    # In a thread like the store's writer, so the loop stays free.
                    lambda seconds: asyncio.to_thread(baseline_db.round, seconds),
                    await appender(alone, data_dir, sizes.batch),
                ],
                sizes.rate_rounds,
                sizes.rate_round_s,
            )
    finally:
        baseline_db.db.close()
    # The stack's guard is below what issue 32's round reached (0.4x) before
    # the search index and the capabilities' projection units, which every
    # appended event now also goes through on the stack's loop (bench/RESULTS.md).
    return AppendRates(
        name=f"batched appends, {sizes.batch} events per call",
        appends=f"session log Append of {sizes.batch}, one writer",
        alone=by_itself,
        in_stack=through_stack,
        baseline=rate_side(f"SQLite {sizes.batch}-row transactions, one writer", baseline),
    ).figures(0.5, 0.3, "baseline: WAL, synchronous=FULL, same disk, same tables, in a thread")
