"""Checkpoints of folded projection state, behind one interface: a SQLite
file of their own (the embedded default) or PostgreSQL (a stack whose
replicas share one database; postgres_checkpoint_store.py).

Everything here can be rebuilt from the session log, so the SQLite file
trades durability for speed: WAL with synchronous=NORMAL (a power loss may
drop the last commits; the engine then folds a few more events from the
log). A lost or deleted file costs a refold, never a wrong answer.

Per (session, unit key) we keep the unit's serialized state, the
state_version it was written with and `changed_at_seq` (the seq of the event
that last changed the unit's view). Per session we keep the watermark: the
last seq folded into those states. Every unit of a session is saved at the
same watermark, in one transaction, so a checkpoint is never half new.
Separately we keep the global subscription position the feeder consumed
(replicas sharing PostgreSQL share it too: it is only a hint of where to
resume, see engine.py).

The SQLite calls are synchronous and short (a handful of small rows): the
async methods make them on the event loop without suspending, so a
checkpoint is taken atomically with respect to folding; the engine does not
rely on that (PostgreSQL's calls do suspend).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

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

    @property
    def size(self) -> int:
        """The bytes of its units' states."""
        return sum(len(unit.state) for unit in self.units.values())


class CheckpointStore(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def load_session(self, session_id: str) -> SessionCheckpoint | None: ...

    async def save_sessions(
        self, checkpoints: Sequence[SessionCheckpoint], position: int | None = None
    ) -> int:
        """Replace the sessions' checkpoints (a session's units no longer
        saved are dropped: kept, they would claim the new watermark) and
        advance the position, in one transaction; how many were written."""
        ...

    async def load_position(self) -> int:
        """The global log position consumed so far; 0 (from the start) when none."""
        ...

    async def save_position(self, position: int) -> None:
        """Advance the position; it never moves back (a resubscription may
        replay from an older cursor)."""
        ...


class SqliteCheckpointStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = None

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # NORMAL: everything here can be rebuilt from the log (see above).
        db = connect_wal(self.path, "NORMAL", any_thread=False, rows=False)
        db.executescript(SCHEMA)
        self._connection = db

    async def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    @property
    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            raise RuntimeError("the checkpoint store is not open")
        return self._connection

    # -- sessions ----------------------------------------------------------------

    async def load_session(self, session_id: str) -> SessionCheckpoint | None:
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
        return to_checkpoint(session_id, row[0], units)

    async def save_sessions(
        self, checkpoints: Sequence[SessionCheckpoint], position: int | None = None
    ) -> int:
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
        self._db.execute(
            "INSERT OR REPLACE INTO session_checkpoint (session_id, watermark) VALUES (?, ?)",
            (checkpoint.session_id, checkpoint.watermark),
        )
        self._db.execute(
            "DELETE FROM unit_checkpoint WHERE session_id = ?", (checkpoint.session_id,)
        )
        self._db.executemany(
            "INSERT INTO unit_checkpoint (session_id, unit_key, state_version, state, "
            "changed_at_seq) VALUES (?, ?, ?, ?, ?)",
            unit_rows(checkpoint),
        )

    # -- feeder position -----------------------------------------------------------

    async def load_position(self) -> int:
        row = self._db.execute("SELECT position FROM feeder WHERE id = 0").fetchone()
        return 0 if row is None else int(row[0])

    async def save_position(self, position: int) -> None:
        self._advance_position(position)

    def _advance_position(self, position: int) -> None:
        self._db.execute(
            "INSERT INTO feeder (id, position) VALUES (0, ?) "
            "ON CONFLICT (id) DO UPDATE SET position = MAX(position, excluded.position)",
            (position,),
        )


def unit_rows(checkpoint: SessionCheckpoint) -> list[tuple[str, str, int, bytes, int]]:
    """The rows of a checkpoint's units, in unit_checkpoint's column order."""
    return [
        (checkpoint.session_id, key, u.state_version, u.state, u.changed_at_seq)
        for key, u in checkpoint.units.items()
    ]


def to_checkpoint(
    session_id: str, watermark: int, units: Sequence[tuple[str, int, bytes, int]]
) -> SessionCheckpoint:
    """A checkpoint from its session row's watermark and its unit rows."""
    return SessionCheckpoint(
        session_id,
        int(watermark),
        {key: UnitCheckpoint(int(v), bytes(s), int(c)) for key, v, s, c in units},
    )
