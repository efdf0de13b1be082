"""SQLite backend of the session log (the embedded default).

WAL with synchronous=FULL: an acknowledged append is a promise to the caller,
so every commit reaches the disk before we answer. NORMAL would survive a
killed process but could drop the last commits on power loss; the log is the
source of truth for every other service, so we pay the fsync.

All statements run on two dedicated threads: one writer connection (SQLite
has a single writer anyway) and one reader connection, which WAL lets read
while the writer commits. Writes reach the writer through a group committer
(group_commit.py): appends that queue while a commit runs share the next
transaction, and its one fsync.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import TypeVar

from services.common.errors import StorageUnavailable
from services.common.sqlite import Synchronous, connect_wal, in_transaction

from . import store_algorithms as algorithms
from .append_plan import AppendRequest, Outcome, Stored, WavePlan, plan_wave, wanted_ids
from .group_commit import CommitStats, GroupCommitter
from .leases import Lease, LeaseChange
from .log_tail import LogTail
from .port import AppendResult, Direction, ReadResult, StoredImage, TailPage
from .store import (
    COPY_IMAGES,
    DROP_IMAGES,
    IMAGE_TABLES,
    LINK_IMAGE,
    PUT_IMAGE,
    READ_IMAGE,
    UNLINK_IMAGES,
    Event,
    PageKey,
    SessionHeader,
    SessionSummary,
    StateCheckpoint,
    event_from_row,
    summary_from_row,
)

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    cwd TEXT NOT NULL,
    created_at_us INTEGER NOT NULL,
    updated_at_us INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    blank INTEGER NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    forked_from TEXT NOT NULL DEFAULT '',
    preview TEXT NOT NULL DEFAULT '',
    running INTEGER NOT NULL DEFAULT 0,
    waiting TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions (updated_at_us DESC, id);
CREATE TABLE IF NOT EXISTS events (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    is_message INTEGER NOT NULL,
    body BLOB NOT NULL,
    UNIQUE (session_id, seq),
    UNIQUE (session_id, event_id)
);
CREATE INDEX IF NOT EXISTS events_messages ON events (session_id, is_message, seq);
CREATE TABLE IF NOT EXISTS storage_probe (id INTEGER PRIMARY KEY, at_us INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS state_checkpoints (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id),
    seq INTEGER NOT NULL,
    version INTEGER NOT NULL,
    state BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS session_leases (
    session_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    token INTEGER NOT NULL,
    expires_at_us INTEGER NOT NULL
);
"""

EVENT_COLUMNS = "session_id, seq, position, body"
INSERT_SESSION = (
    "INSERT INTO sessions (id, cwd, created_at_us, updated_at_us, forked_from, last_seq, blank) "
    "VALUES (?, ?, ?, ?, ?, -1, 1)"
)
INSERT_EVENT = (
    "INSERT INTO events (session_id, seq, event_id, kind, is_message, body) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
UPSERT_LEASE = (
    "INSERT INTO session_leases (session_id, owner, token, expires_at_us) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, token = excluded.token, "
    "expires_at_us = excluded.expires_at_us"
)
TOUCH_SESSION = (
    "UPDATE sessions SET last_seq = ?, updated_at_us = ?, blank = blank AND ?, "
    "title = COALESCE(?, title), preview = COALESCE(?, preview), "
    "running = COALESCE(?, running), waiting = COALESCE(?, waiting) WHERE id = ?"
)
# The rows after a page's last (sessions_by_update's order: a keyset, not an offset).
AFTER_PAGE = "(updated_at_us < ? OR (updated_at_us = ? AND id > ?))"
# Host parameters one statement binds at most (SQLite's old default limit is 999).
CHUNK = 500
# Columns added to `sessions` after its first release, for files made before.
ADDED_COLUMNS = {
    "preview": "TEXT NOT NULL DEFAULT ''",
    "running": "INTEGER NOT NULL DEFAULT 0",
    "waiting": "TEXT NOT NULL DEFAULT ''",
}


def _sql(statement: str) -> str:
    return statement.format(p="?")


def _migrate(db: sqlite3.Connection) -> None:
    db.executescript(SCHEMA + IMAGE_TABLES.format(blob="BLOB"))
    present = {row[1] for row in db.execute("PRAGMA table_info(sessions)")}
    for column, definition in ADDED_COLUMNS.items():
        if column not in present:
            db.execute(f"ALTER TABLE sessions ADD COLUMN {column} {definition}")


def _to_event(row: tuple[str, int, int, bytes]) -> Event:
    return event_from_row(*row)


class SqliteSessionStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessionlog-w")
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessionlog-r")
        self._write_db: sqlite3.Connection | None = None
        self._read_db: sqlite3.Connection | None = None
        self._committer = GroupCommitter(self._commit_wave)
        # The last write failed for the storage's sake (see _write_now).
        self._write_failed = False
        # What the followers read next (one writer: positions in commit order).
        self._tail = LogTail()

    @property
    def stats(self) -> CommitStats:
        return self._committer.stats

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        self._tail.clear()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write_db = await self._on(self._writer, self._connect)
        await self._on(self._writer, lambda: _migrate(self._db(write=True)))
        self._read_db = await self._on(self._reader, self._connect)

    async def close(self) -> None:
        await self._committer.close()
        if self._write_db is not None:
            await self._on(self._writer, self._write_db.close)
            self._write_db = None
        if self._read_db is not None:
            await self._on(self._reader, self._read_db.close)
            self._read_db = None
        self._writer.shutdown(wait=True)
        self._reader.shutdown(wait=True)

    def _connect(self) -> sqlite3.Connection:
        return connect_wal(self.path, "FULL")

    def _db(self, *, write: bool = False) -> sqlite3.Connection:
        db = self._write_db if write else self._read_db
        if db is None:
            raise RuntimeError("session store is not open")
        return db

    @staticmethod
    async def _on(executor: ThreadPoolExecutor, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(executor, work)

    async def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await self._on(self._reader, lambda: _typed(lambda: work(self._db())))

    async def _write(
        self, work: Callable[[sqlite3.Connection], T], synchronous: Synchronous | None = None
    ) -> T:
        return await self._on(self._writer, lambda: self._write_now(work, synchronous))

    def _write_now(
        self, work: Callable[[sqlite3.Connection], T], synchronous: Synchronous | None = None
    ) -> T:
        """On the writer thread. After a refused write the connection is
        opened afresh: SQLite keeps a connection read-only that opened a
        read-only file, so a disk made writable again needs a new one."""

        def attempt() -> T:
            if self._write_failed:
                self._reopen_writer()
            return in_transaction(self._db(write=True), work, synchronous=synchronous)

        try:
            result = _typed(attempt)
        except StorageUnavailable:
            self._write_failed = True
            raise
        self._write_failed = False
        return result

    def _reopen_writer(self) -> None:
        if self._write_db is not None:
            with suppress(sqlite3.Error):
                self._write_db.close()
            self._write_db = None
        self._write_db = self._connect()

    async def probe(self) -> None:
        await self._write(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO storage_probe (id, at_us) VALUES (1, ?)",
                (time.time_ns() // 1000,),
            )
        )

    # -- sessions --------------------------------------------------------------

    async def get_header(self, session_id: str) -> SessionHeader | None:
        def query(db: sqlite3.Connection) -> SessionHeader | None:
            row = db.execute(
                "SELECT id, cwd, created_at_us, forked_from FROM sessions WHERE id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                return None
            return SessionHeader(row["id"], row["cwd"], row["created_at_us"], row["forked_from"])

        return await self._read(query)

    async def summary(self, session_id: str) -> SessionSummary | None:
        return await self._read(lambda db: _summary_or_none(db, session_id))

    async def list_sessions(
        self,
        limit: int,
        after: PageKey | None,
        session_ids: Sequence[str],
        running_only: bool = False,
    ) -> tuple[list[SessionSummary], bool]:
        def query(db: sqlite3.Connection) -> tuple[list[SessionSummary], bool]:
            conditions = ["running = 1"] if running_only else []
            args: list[object] = [*session_ids]
            if session_ids:
                conditions.append(f"id IN ({','.join('?' * len(session_ids))})")
            if after is not None:
                conditions.append(AFTER_PAGE)
                args += [after.updated_at_us, after.updated_at_us, after.id]
            where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
            rows = db.execute(
                f"SELECT * FROM sessions {where} ORDER BY updated_at_us DESC, id LIMIT ?",
                (*args, limit + 1),
            ).fetchall()
            return [summary_from_row(r) for r in rows[:limit]], len(rows) > limit

        return await self._read(query)

    # -- append ----------------------------------------------------------------

    async def append(
        self,
        header: SessionHeader,
        events: Sequence[Event],
        expected_last_seq: int | None,
        now_us: int,
        lease_token: int | None = None,
    ) -> AppendResult:
        request = AppendRequest(header, events, expected_last_seq, now_us, lease_token)
        return await self._committer.append(request)

    async def _commit_wave(self, requests: Sequence[AppendRequest]) -> list[Outcome]:
        plan, last_position = await self._write(lambda db: _append_wave(db, requests))
        self._tail.committed(plan.events, plan.written, last_position)
        return plan.outcomes

    # -- leases ------------------------------------------------------------------

    async def change_lease(self, session_id: str, change: LeaseChange) -> Lease:
        def apply(db: sqlite3.Connection) -> Lease:
            row = db.execute(
                "SELECT session_id, owner, token, expires_at_us FROM session_leases "
                "WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            stored, answer = change(None if row is None else Lease(*row))
            db.execute(
                UPSERT_LEASE, (stored.session_id, stored.owner, stored.token, stored.expires_at_us)
            )
            return answer

        return await self._committer.alone(lambda: self._write(apply))

    # -- reads -------------------------------------------------------------------

    async def read(
        self, session_id: str, from_seq: int | None, direction: Direction, limit: int
    ) -> ReadResult:
        algorithm = algorithms.read(session_id, from_seq, direction, limit)
        return await self._read(lambda db: algorithms.run(algorithm, partial(_answer, db)))

    async def tail_page(
        self, session_id: str, before_seq: int | None, message_limit: int
    ) -> TailPage:
        algorithm = algorithms.tail_page(session_id, before_seq, message_limit)
        return await self._read(lambda db: algorithms.run(algorithm, partial(_answer, db)))

    async def read_all(self, after_position: int, limit: int) -> list[Event]:
        recent = self._tail.read(after_position, limit)
        if recent is not None:
            return recent

        def query(db: sqlite3.Connection) -> list[Event]:
            rows = db.execute(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?",
                (after_position, limit),
            ).fetchall()
            return [_to_event(tuple(r)) for r in rows]

        return await self._read(query)

    async def last_position(self) -> int:
        def query(db: sqlite3.Connection) -> int:
            row = db.execute("SELECT MAX(position) FROM events").fetchone()
            return int(row[0] or 0)

        return await self._read(query)

    # -- fork --------------------------------------------------------------------

    async def fork(
        self, source_id: str, up_to_seq: int | None, header: SessionHeader, now_us: int
    ) -> SessionSummary:
        algorithm = algorithms.fork(source_id, up_to_seq, header, now_us)
        try:
            return await self._committer.alone(
                lambda: self._write(lambda db: algorithms.run(algorithm, partial(_answer, db)))
            )
        finally:
            self._tail.clear()  # the copies took positions the tail does not hold

    async def delete(self, session_id: str) -> bool:
        try:
            return await self._committer.alone(
                lambda: self._write(lambda db: _delete(db, session_id))
            )
        finally:
            self._tail.clear()  # it may hold the deleted events

    # -- images --------------------------------------------------------------------

    async def put_images(self, session_id: str, images: Sequence[StoredImage]) -> None:
        def put(db: sqlite3.Connection) -> None:
            for image in images:
                db.execute(_sql(PUT_IMAGE), (image.digest, image.media_type, image.data))
                db.execute(_sql(LINK_IMAGE), (session_id, image.digest))

        await self._committer.alone(lambda: self._write(put))

    async def read_image(self, session_id: str, digest: str) -> StoredImage | None:
        def query(db: sqlite3.Connection) -> StoredImage | None:
            row = db.execute(_sql(READ_IMAGE), (session_id, digest)).fetchone()
            return None if row is None else StoredImage(digest, row[0], bytes(row[1]))

        return await self._read(query)

    # -- checkpoints ---------------------------------------------------------------

    async def load_checkpoint(self, session_id: str) -> StateCheckpoint | None:
        def query(db: sqlite3.Connection) -> StateCheckpoint | None:
            row = db.execute(
                "SELECT seq, version, state FROM state_checkpoints WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            return None if row is None else StateCheckpoint(row[0], row[1], bytes(row[2]))

        return await self._read(query)

    async def save_checkpoint(self, session_id: str, checkpoint: StateCheckpoint) -> None:
        def save(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO state_checkpoints (session_id, seq, version, state) "
                "SELECT id, ?, ?, ? FROM sessions WHERE id = ? "
                "ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, "
                "version = excluded.version, state = excluded.state "
                "WHERE excluded.seq > state_checkpoints.seq "
                "OR excluded.version != state_checkpoints.version",
                (checkpoint.seq, checkpoint.version, checkpoint.state, session_id),
            )

        # Derived from events already durable (a lost one is folded again
        # from the log): its commit does not wait for an fsync of its own.
        await self._committer.alone(lambda: self._write(save, synchronous="NORMAL"))


def _typed(work: Callable[[], T]) -> T:
    """SQLite refusing the work itself (read-only, full, I/O error, locked
    for too long) is the storage being unavailable, not a bug of the call."""
    try:
        return work()
    except sqlite3.OperationalError as error:
        raise StorageUnavailable(str(error)) from error


def _summary_or_none(db: sqlite3.Connection, session_id: str) -> SessionSummary | None:
    row = db.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else summary_from_row(row)


def _events(db: sqlite3.Connection, where: str, params: tuple[object, ...]) -> list[Event]:
    rows = db.execute(f"SELECT {EVENT_COLUMNS} FROM events WHERE {where}", params).fetchall()
    return [_to_event(tuple(r)) for r in rows]


def _answer(db: sqlite3.Connection, ask: algorithms.Ask) -> object:
    """One ask of the shared store algorithms, in SQLite's SQL."""
    match ask:
        case algorithms.LastSeq(session_id):
            row = db.execute("SELECT last_seq FROM sessions WHERE id = ?", (session_id,)).fetchone()
            return None if row is None else int(row[0])
        case algorithms.Summary(session_id):
            return _summary_or_none(db, session_id)
        case algorithms.EventsFrom(session_id, from_seq, limit):
            where = "session_id = ? AND seq >= ? ORDER BY seq LIMIT ?"
            return _events(db, where, (session_id, from_seq, limit))
        case algorithms.EventsBack(session_id, up_to_seq, limit):
            where = "session_id = ? AND seq <= ? ORDER BY seq DESC LIMIT ?"
            return _events(db, where, (session_id, up_to_seq, limit))
        case algorithms.EventsThrough(session_id, last_seq):
            where = "session_id = ? AND seq <= ? ORDER BY seq"
            return _events(db, where, (session_id, last_seq))
        case algorithms.EventsBetween(session_id, start, end):
            where = "session_id = ? AND seq >= ? AND seq < ? ORDER BY seq"
            return _events(db, where, (session_id, start, end))
        case algorithms.MessagesBack(session_id, end, offset):
            rows = db.execute(
                "SELECT seq FROM events WHERE session_id = ? AND is_message = 1 AND seq < ? "
                "ORDER BY seq DESC LIMIT 2 OFFSET ?",
                (session_id, end, offset),
            ).fetchall()
            return [int(row[0]) for row in rows]
        case algorithms.AddSession(session):
            db.execute(INSERT_SESSION, session)
        case algorithms.AddEvents(events):
            db.executemany(INSERT_EVENT, events)
        case algorithms.Touch(touch):
            db.execute(TOUCH_SESSION, touch)
        case algorithms.Forked():
            pass  # one process writes the file: no other replica to wake
        case algorithms.CopyImages(source_id, target_id):
            db.execute(_sql(COPY_IMAGES), (target_id, source_id))
    return None


def _chunks(values: Sequence[str]) -> list[Sequence[str]]:
    return [values[start : start + CHUNK] for start in range(0, len(values), CHUNK)]


def _marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))


def _append_wave(db: sqlite3.Connection, requests: Sequence[AppendRequest]) -> tuple[WavePlan, int]:
    """One wave in the caller's transaction (group_commit.py), and the
    position of the last event it inserted (0 if none)."""
    plan = plan_wave(_stored(db, requests), requests)
    _write_plan(db, plan)
    if not plan.events:
        return plan, 0
    return plan, int(db.execute("SELECT last_insert_rowid()").fetchone()[0])


def _stored(db: sqlite3.Connection, requests: Sequence[AppendRequest]) -> Stored:
    wanted = wanted_ids(requests)
    last_seqs: dict[str, int] = {}
    for chunk in _chunks(list(wanted)):
        rows = db.execute(
            f"SELECT id, last_seq FROM sessions WHERE id IN ({_marks(chunk)})", chunk
        ).fetchall()
        last_seqs.update({r[0]: int(r[1]) for r in rows})
    seqs: dict[tuple[str, str], int] = {}
    for session_id in last_seqs:
        for chunk in _chunks(wanted[session_id]):
            rows = db.execute(
                f"SELECT event_id, seq FROM events WHERE session_id = ? "
                f"AND event_id IN ({_marks(chunk)})",
                (session_id, *chunk),
            ).fetchall()
            seqs.update({(session_id, r[0]): int(r[1]) for r in rows})
    lease_tokens: dict[str, int] = {}
    for chunk in _chunks(list(wanted)):
        rows = db.execute(
            f"SELECT session_id, token FROM session_leases WHERE session_id IN ({_marks(chunk)})",
            chunk,
        ).fetchall()
        lease_tokens.update({r[0]: int(r[1]) for r in rows})
    return Stored(last_seqs, seqs, lease_tokens)


def _write_plan(db: sqlite3.Connection, plan: WavePlan) -> None:
    db.executemany(INSERT_SESSION, plan.new_sessions)
    db.executemany(INSERT_EVENT, plan.events)
    db.executemany(TOUCH_SESSION, plan.touches)


def _delete(db: sqlite3.Connection, session_id: str) -> bool:
    db.execute(_sql(DROP_IMAGES), (session_id, session_id))
    db.execute(_sql(UNLINK_IMAGES), (session_id,))
    db.execute("DELETE FROM state_checkpoints WHERE session_id = ?", (session_id,))
    db.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
    return db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount > 0
