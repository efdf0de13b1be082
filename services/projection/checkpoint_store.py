"""Checkpoints of folded projection state, in a SQLite file of their own.

Everything here can be rebuilt from the session log, so the file trades
durability for speed: WAL with synchronous=NORMAL (a power loss may drop the
last commits; the engine then folds a few more events from the log). A lost or
deleted file costs a refold, never a wrong answer.

Per (session, unit key) we keep the unit's serialized state, the
state_version it was written with and `changed_at_seq` (the seq of the event
that last changed the unit's view). Per session we keep the watermark: the
last seq folded into those states. Every unit of a session is saved at the
same watermark, in one transaction, so a checkpoint is never half new.
Separately we keep the global subscription position the feeder consumed.

Calls are synchronous and short (a handful of small rows); the engine makes
them on the event loop so a checkpoint is taken atomically with respect to
folding.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from services.common.sqlite import connect_wal

SCHEMA = """
CREATE TABLE IF NOT EXISTS session_checkpoint (
    session_id TEXT PRIMARY KEY,
    watermark INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS unit_checkpoint (
    session_id TEXT NOT NULL REFERENCES session_checkpoint (session_id),
    unit_key TEXT NOT NULL,
    state_version INTEGER NOT NULL,
    state BLOB NOT NULL,
    changed_at_seq INTEGER NOT NULL,
    PRIMARY KEY (session_id, unit_key)
);
CREATE TABLE IF NOT EXISTS feeder (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    position INTEGER NOT NULL
);
"""


@dataclass(frozen=True)
class UnitCheckpoint:
    state_version: int
    state: bytes
    changed_at_seq: int


@dataclass(frozen=True)
class SessionCheckpoint:
    session_id: str
    watermark: int
    units: Mapping[str, UnitCheckpoint]


class CheckpointStore:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    @classmethod
    def open(cls, path: Path) -> CheckpointStore:
        path.parent.mkdir(parents=True, exist_ok=True)
        # NORMAL: everything here can be rebuilt from the log (see above).
        db = connect_wal(path, "NORMAL", any_thread=False, rows=False)
        db.executescript(SCHEMA)
        return cls(db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> CheckpointStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- sessions ----------------------------------------------------------------

    def load_session(self, session_id: str) -> SessionCheckpoint | None:
        row = self._db.execute(
            "SELECT watermark FROM session_checkpoint WHERE session_id = ?", (session_id,)
        ).fetchone()
        if row is None:
            return None
        units = self._db.execute(
            "SELECT unit_key, state_version, state, changed_at_seq FROM unit_checkpoint "
            "WHERE session_id = ?",
            (session_id,),
        ).fetchall()
        return SessionCheckpoint(
            session_id,
            int(row[0]),
            {key: UnitCheckpoint(int(v), bytes(s), int(c)) for key, v, s, c in units},
        )

    def save_sessions(
        self, checkpoints: Iterable[SessionCheckpoint], position: int | None = None
    ) -> int:
        """Replace the sessions' checkpoints (and advance the position) in one
        transaction; returns how many sessions were written."""
        written = 0
        self._db.execute("BEGIN")
        try:
            for checkpoint in checkpoints:
                self._replace(checkpoint)
                written += 1
            if position is not None:
                self._advance_position(position)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return written

    def _replace(self, checkpoint: SessionCheckpoint) -> None:
        # Rows of units no longer saved are dropped: kept, they would claim an
        # older watermark than the session row says.
        self._db.execute(
            "DELETE FROM unit_checkpoint WHERE session_id = ?", (checkpoint.session_id,)
        )
        self._db.execute(
            "INSERT OR REPLACE INTO session_checkpoint (session_id, watermark) VALUES (?, ?)",
            (checkpoint.session_id, checkpoint.watermark),
        )
        self._db.executemany(
            "INSERT INTO unit_checkpoint (session_id, unit_key, state_version, state, "
            "changed_at_seq) VALUES (?, ?, ?, ?, ?)",
            [
                (checkpoint.session_id, key, u.state_version, u.state, u.changed_at_seq)
                for key, u in checkpoint.units.items()
            ],
        )

    # -- feeder position -----------------------------------------------------------

    def load_position(self) -> int:
        """The global log position consumed so far; 0 (from the start) when none."""
        row = self._db.execute("SELECT position FROM feeder WHERE id = 0").fetchone()
        return 0 if row is None else int(row[0])

    def save_position(self, position: int) -> None:
        self._advance_position(position)

    def _advance_position(self, position: int) -> None:
        # Never move back: a resubscription may replay from an older cursor.
        self._db.execute(
            "INSERT INTO feeder (id, position) VALUES (0, ?) "
            "ON CONFLICT (id) DO UPDATE SET position = MAX(position, excluded.position)",
            (position,),
        )
