from __future__ import annotations

from pathlib import Path

from services.projection.checkpoint_store import (
    CheckpointStore,
    SessionCheckpoint,
    UnitCheckpoint,
)


def checkpoint(session_id: str, watermark: int, **units: UnitCheckpoint) -> SessionCheckpoint:
    return SessionCheckpoint(session_id, watermark, units)


def test_checkpoints_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "projection.db"
    saved = checkpoint(
        "s1", 41, messages=UnitCheckpoint(1, b"7", 40), title=UnitCheckpoint(3, b"", -1)
    )
    with CheckpointStore.open(path) as store:
        assert store.save_sessions([saved], position=99) == 1

    with CheckpointStore.open(path) as store:
        assert store.load_session("s1") == saved
        assert store.load_session("s2") is None
        assert store.load_position() == 99


def test_a_new_checkpoint_replaces_every_unit_of_the_session(tmp_path: Path) -> None:
    with CheckpointStore.open(tmp_path / "projection.db") as store:
        store.save_sessions(
            [checkpoint("s1", 3, a=UnitCheckpoint(1, b"a", 2), b=UnitCheckpoint(1, b"b", 3))]
        )
        store.save_sessions([checkpoint("s1", 9, a=UnitCheckpoint(1, b"A", 9))])

        # "b" is no longer folded: its old row must not claim watermark 9.
        assert store.load_session("s1") == checkpoint("s1", 9, a=UnitCheckpoint(1, b"A", 9))


def test_the_position_starts_at_zero_and_never_moves_back(tmp_path: Path) -> None:
    with CheckpointStore.open(tmp_path / "projection.db") as store:
        assert store.load_position() == 0
        store.save_position(10)
        store.save_position(4)
        store.save_sessions([], position=7)

        assert store.load_position() == 10


def test_the_store_uses_wal(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "projection.db"
    CheckpointStore.open(path).close()

    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
