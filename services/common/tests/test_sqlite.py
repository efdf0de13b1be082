"""A failed write transaction leaves its connection ready for the next one,
and the caller sees the error that failed it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from services.common.sqlite import connect_wal, in_transaction


def _insert(db: sqlite3.Connection, table: str, values: list[object]) -> None:
    db.executemany(f"INSERT INTO {table} VALUES (?)", [(v,) for v in values])


def test_a_commit_that_fails_is_rolled_back(tmp_path: Path) -> None:
    db = connect_wal(tmp_path / "t.db", "FULL")
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    db.execute(
        "CREATE TABLE child (p INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)"
    )
    with pytest.raises(sqlite3.IntegrityError):  # checked at COMMIT
        in_transaction(db, lambda db: _insert(db, "child", [5]))
    assert not db.in_transaction
    in_transaction(db, lambda db: _insert(db, "parent", [1]))
    assert db.execute("SELECT COUNT(*) FROM child").fetchone()[0] == 0


def test_a_transaction_sqlite_rolled_back_itself_reports_its_own_error(tmp_path: Path) -> None:
    db = connect_wal(tmp_path / "t.db", "FULL")
    db.execute("CREATE TABLE blobs (b BLOB)")
    db.execute("PRAGMA max_page_count=10")
    with pytest.raises(sqlite3.OperationalError, match="full"):
        in_transaction(db, lambda db: _insert(db, "blobs", [b"x" * 4000] * 100))
    assert not db.in_transaction
    in_transaction(db, lambda db: _insert(db, "blobs", [b"small"]))
    assert db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 1


FULL, NORMAL = 2, 1  # PRAGMA synchronous's answers


def test_a_transaction_of_its_own_level_leaves_the_connection_at_its_own(tmp_path: Path) -> None:
    """A write of derived data commits at NORMAL; the appends after it are
    FULL again (fsynced), even when the relaxed one failed."""
    db = connect_wal(tmp_path / "t.db", "FULL")
    db.execute("CREATE TABLE t (v INTEGER UNIQUE)")
    levels: list[int] = []

    def write(db: sqlite3.Connection, value: int) -> None:
        levels.append(db.execute("PRAGMA synchronous").fetchone()[0])
        _insert(db, "t", [value])

    in_transaction(db, lambda db: write(db, 1), synchronous="NORMAL")
    with pytest.raises(sqlite3.IntegrityError):
        in_transaction(db, lambda db: write(db, 1), synchronous="NORMAL")
    in_transaction(db, lambda db: write(db, 2))
    assert levels == [NORMAL, NORMAL, FULL]
    assert db.execute("PRAGMA synchronous").fetchone()[0] == FULL
    assert [v for (v,) in db.execute("SELECT v FROM t ORDER BY v")] == [1, 2]
