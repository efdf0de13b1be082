"""SQLite as every service's embedded store uses it: WAL, explicit
transactions, and a synchronous level each store chooses for its durability."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

T = TypeVar("T")
Synchronous = Literal["FULL", "NORMAL"]


def connect_wal(
    path: Path,
    synchronous: Synchronous,
    *,
    busy_timeout_ms: int = 5000,
    any_thread: bool = True,
    rows: bool = True,
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit) on a WAL
    database; `rows` gives sqlite3.Row results."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=not any_thread)
    if rows:
        db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    return db


def in_transaction(
    db: sqlite3.Connection,
    work: Callable[[sqlite3.Connection], T],
    *,
    synchronous: Synchronous | None = None,
) -> T:
    """Run `work` in one write transaction, taken up front (no upgrade deadlock).

    A failed COMMIT rolls back too, and a transaction SQLite already rolled
    back on its own (e.g. SQLITE_FULL) is not rolled back twice: either way
    the connection is ready for the next transaction and the caller sees the
    original error. `synchronous`: this transaction's level where it differs
    from the connection's (NORMAL for data derived from what is already
    durable: its commit need not wait for the disk, and WAL stays intact)."""
    if synchronous is None:
        return _transaction(db, work)
    before = db.execute("PRAGMA synchronous").fetchone()[0]
    db.execute(f"PRAGMA synchronous={synchronous}")
    try:
        return _transaction(db, work)
    finally:
        db.execute(f"PRAGMA synchronous={int(before)}")


def _transaction(db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    db.execute("BEGIN IMMEDIATE")
    try:
        result = work(db)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return result
