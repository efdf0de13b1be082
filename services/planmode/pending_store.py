"""Durable pending selections: a choice queued while a turn runs waits for
the next boundary, and must survive a restart of the plan-mode service (the
seeds lose it; we don't).

At most one selection per session: a newer choice replaces the older one.
Each selection remembers the log seq it was made at, so a plan/mode recorded
after it (by the boundary, the exit tool or another replica) outdates it even
if deleting the row failed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from services.common.sqlite import connect_wal

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS pending_selections (
    session_id TEXT PRIMARY KEY,
    active INTEGER NOT NULL,
    queued_at_seq INTEGER NOT NULL,
    updated_at_us INTEGER NOT NULL
);
"""


@dataclass(frozen=True)
class PendingSelection:
    active: bool
    # The last seq of the log when the user chose.
    queued_at_seq: int


class PendingStore(Protocol):
    async def get(self, session_id: str) -> PendingSelection | None:
        """The selection waiting for the session's next boundary, if any."""
        ...

    async def put(self, session_id: str, selection: PendingSelection) -> None: ...

    async def discard(self, session_id: str) -> None: ...


class SqlitePendingStore:
    """One SQLite file in WAL mode; statements run on a single thread that
    owns the connection. synchronous=FULL: QUEUED is a promise to the user."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="planmode-pending")
        self._db: sqlite3.Connection | None = None

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = await self._run(self._connect)

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await self._run(db.close)
        self._thread.shutdown(wait=True)

    async def get(self, session_id: str) -> PendingSelection | None:
        def query() -> PendingSelection | None:
            row = (
                self._connection()
                .execute(
                    "SELECT active, queued_at_seq FROM pending_selections WHERE session_id = ?",
                    (session_id,),
                )
                .fetchone()
            )
            return None if row is None else PendingSelection(bool(row[0]), int(row[1]))

        return await self._run(query)

    async def put(self, session_id: str, selection: PendingSelection) -> None:
        def upsert() -> None:
            self._connection().execute(
                "INSERT INTO pending_selections "
                "(session_id, active, queued_at_seq, updated_at_us) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (session_id) DO UPDATE SET active = excluded.active, "
                "queued_at_seq = excluded.queued_at_seq, updated_at_us = excluded.updated_at_us",
                (session_id, int(selection.active), selection.queued_at_seq, _now_us()),
            )

        await self._run(upsert)

    async def discard(self, session_id: str) -> None:
        def delete() -> None:
            self._connection().execute(
                "DELETE FROM pending_selections WHERE session_id = ?", (session_id,)
            )

        await self._run(delete)

    def _connect(self) -> sqlite3.Connection:
        db = connect_wal(self.path, "FULL", rows=False)
        db.executescript(SCHEMA)
        return db

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("pending store is not open")
        return self._db

    async def _run(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, work)


def _now_us() -> int:
    return time.time_ns() // 1000


@asynccontextmanager
async def open_pending_store(path: Path) -> AsyncIterator[SqlitePendingStore]:
    """A pending store on a SQLite file, closed on exit."""
    store = SqlitePendingStore(path)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
