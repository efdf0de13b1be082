"""What only the SQLite checkpoint file does; what every backend does is in
tests/contract/test_checkpoint_store.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from services.projection.checkpoint_store import SqliteCheckpointStore


async def test_the_store_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "projection.db"
    store = SqliteCheckpointStore(path)
    await store.open()
    await store.close()

    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
