"""Storage of workspaces and their memberships, behind a small interface.

The SQLite backend is the embedded default. WAL with synchronous=FULL: the
crash-safety argument of session creation (see domain.Workspaces) rests on a
membership being durable before the session log hears of the session, so a
committed membership must survive power loss, not only a killed process.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from services.common.sqlite import connect_wal, in_transaction

T = TypeVar("T")

# SQLite's default limit on host parameters is 999 on old builds.
IN_CHUNK = 500


@dataclass(frozen=True)
class WorkspaceRecord:
    id: str
    account_id: str
    # Canonical (see paths.canonical_path); unique per account.
    path: str
    created_at_us: int


@dataclass(frozen=True)
class Membership:
    """A session's place in a workspace. A session id is a member of at most
    one workspace, across all accounts."""

    workspace_id: str
    session_id: str
    # The cwd the session is (re)created with; the workspace path at the time.
    cwd: str
    archived: bool
    created_at_us: int


class WorkspaceStore(Protocol):
    """What the domain (domain.Workspaces) needs of storage. Backends: SQLite
    here, PostgreSQL in postgres_store.py; both pass tests/contract."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def add_workspace(self, record: WorkspaceRecord) -> tuple[WorkspaceRecord, bool]:
        """Store `record` unless its account already has a workspace at its
        path; returns the stored workspace and whether it was new."""
        ...

    async def get_workspace(self, workspace_id: str) -> WorkspaceRecord | None: ...

    async def list_workspaces(self, account_id: str) -> list[WorkspaceRecord]:
        """The account's workspaces in creation order."""
        ...

    async def add_membership(self, membership: Membership) -> tuple[Membership, bool]:
        """Store `membership` unless its session id is already a member
        somewhere; returns the stored membership and whether it was new."""
        ...

    async def get_membership(self, session_id: str) -> Membership | None: ...

    async def list_memberships(self, workspace_ids: Sequence[str]) -> list[Membership]:
        """Members of these workspaces, archived ones included, in the order
        they joined."""
        ...

    async def set_archived(self, session_id: str, archived: bool) -> None: ...

    async def remove_workspace_if_empty(self, workspace_id: str) -> bool:
        """Remove the workspace if it has no members (archived included);
        whether it was removed."""
        ...

    async def remove_membership(self, session_id: str) -> None: ...


SCHEMA = """
CREATE TABLE IF NOT EXISTS workspaces (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    account_id TEXT NOT NULL,
    path TEXT NOT NULL,
    created_at_us INTEGER NOT NULL,
    UNIQUE (account_id, path)
);
CREATE TABLE IF NOT EXISTS memberships (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id),
    session_id TEXT NOT NULL UNIQUE,
    cwd TEXT NOT NULL,
    archived INTEGER NOT NULL DEFAULT 0,
    created_at_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memberships_by_workspace ON memberships (workspace_id, seq);
"""

WORKSPACE_COLUMNS = "id, account_id, path, created_at_us"
MEMBERSHIP_COLUMNS = "workspace_id, session_id, cwd, archived, created_at_us"


# A row by column name: sqlite3.Row, or a dict from PostgreSQL.
Row = Mapping[str, Any] | sqlite3.Row


def to_workspace(row: Row) -> WorkspaceRecord:
    return WorkspaceRecord(row["id"], row["account_id"], row["path"], row["created_at_us"])


def to_membership(row: Row) -> Membership:
    return Membership(
        row["workspace_id"],
        row["session_id"],
        row["cwd"],
        bool(row["archived"]),
        row["created_at_us"],
    )


class SqliteWorkspaceStore:
    """Every statement runs on one dedicated thread with one connection: the
    workload is tiny and a single writer keeps transactions trivially serial."""

    def __init__(self, path: Path, busy_timeout_ms: int = 5000) -> None:
        self.path = path
        # How long a write waits for another process's lock before failing.
        self.busy_timeout_ms = busy_timeout_ms
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="workspace-db")
        self._conn: sqlite3.Connection | None = None

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = await self._run(self._connect)
        # executescript commits on its own, so it runs outside _in_transaction;
        # every statement of the schema is idempotent.
        await self._execute(lambda db: db.executescript(SCHEMA))

    async def close(self) -> None:
        if self._conn is not None:
            await self._run(self._conn.close)
            self._conn = None
        self._executor.shutdown(wait=True)

    def _connect(self) -> sqlite3.Connection:
        db = connect_wal(self.path, "FULL", busy_timeout_ms=self.busy_timeout_ms)
        db.execute("PRAGMA foreign_keys=ON")
        return db

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("workspace store is not open")
        return self._conn

    async def _run(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    async def _execute(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(lambda: work(self._db()))

    async def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(lambda: in_transaction(self._db(), work))

    # -- workspaces ------------------------------------------------------------

    async def add_workspace(self, record: WorkspaceRecord) -> tuple[WorkspaceRecord, bool]:
        def work(db: sqlite3.Connection) -> tuple[WorkspaceRecord, bool]:
            inserted = db.execute(
                f"INSERT INTO workspaces ({WORKSPACE_COLUMNS}) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (account_id, path) DO NOTHING",
                (record.id, record.account_id, record.path, record.created_at_us),
            ).rowcount
            row = db.execute(
                f"SELECT {WORKSPACE_COLUMNS} FROM workspaces WHERE account_id = ? AND path = ?",
                (record.account_id, record.path),
            ).fetchone()
            return to_workspace(row), inserted == 1

        return await self._transaction(work)

    async def get_workspace(self, workspace_id: str) -> WorkspaceRecord | None:
        def work(db: sqlite3.Connection) -> WorkspaceRecord | None:
            row = db.execute(
                f"SELECT {WORKSPACE_COLUMNS} FROM workspaces WHERE id = ?", (workspace_id,)
            ).fetchone()
            return None if row is None else to_workspace(row)

        return await self._execute(work)

    async def list_workspaces(self, account_id: str) -> list[WorkspaceRecord]:
        def work(db: sqlite3.Connection) -> list[WorkspaceRecord]:
            rows = db.execute(
                f"SELECT {WORKSPACE_COLUMNS} FROM workspaces WHERE account_id = ? ORDER BY seq",
                (account_id,),
            ).fetchall()
            return [to_workspace(r) for r in rows]

        return await self._execute(work)

    # -- memberships -------------------------------------------------------------

    async def add_membership(self, membership: Membership) -> tuple[Membership, bool]:
        def work(db: sqlite3.Connection) -> tuple[Membership, bool]:
            m = membership
            inserted = db.execute(
                f"INSERT INTO memberships ({MEMBERSHIP_COLUMNS}) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (session_id) DO NOTHING",
                (m.workspace_id, m.session_id, m.cwd, int(m.archived), m.created_at_us),
            ).rowcount
            return _select_membership(db, m.session_id), inserted == 1

        return await self._transaction(work)

    async def get_membership(self, session_id: str) -> Membership | None:
        def work(db: sqlite3.Connection) -> Membership | None:
            row = db.execute(
                f"SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            return None if row is None else to_membership(row)

        return await self._execute(work)

    async def list_memberships(self, workspace_ids: Sequence[str]) -> list[Membership]:
        def work(db: sqlite3.Connection) -> list[tuple[int, Membership]]:
            found: list[tuple[int, Membership]] = []
            for start in range(0, len(workspace_ids), IN_CHUNK):
                chunk = workspace_ids[start : start + IN_CHUNK]
                rows = db.execute(
                    f"SELECT seq, {MEMBERSHIP_COLUMNS} FROM memberships "
                    f"WHERE workspace_id IN ({','.join('?' * len(chunk))})",
                    tuple(chunk),
                ).fetchall()
                found.extend((row["seq"], to_membership(row)) for row in rows)
            return found

        rows = await self._execute(work)
        return [m for _, m in sorted(rows, key=lambda pair: pair[0])]

    async def set_archived(self, session_id: str, archived: bool) -> None:
        await self._transaction(
            lambda db: db.execute(
                "UPDATE memberships SET archived = ? WHERE session_id = ?",
                (int(archived), session_id),
            )
        )

    async def remove_workspace_if_empty(self, workspace_id: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            # One statement: a member joining concurrently keeps the workspace.
            removed = db.execute(
                "DELETE FROM workspaces WHERE id = ? AND NOT EXISTS "
                "(SELECT 1 FROM memberships WHERE workspace_id = ?)",
                (workspace_id, workspace_id),
            ).rowcount
            return bool(removed)

        return await self._transaction(work)

    async def remove_membership(self, session_id: str) -> None:
        await self._transaction(
            lambda db: db.execute("DELETE FROM memberships WHERE session_id = ?", (session_id,))
        )


def _select_membership(db: sqlite3.Connection, session_id: str) -> Membership:
    row = db.execute(
        f"SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE session_id = ?", (session_id,)
    ).fetchone()
    return to_membership(row)


@asynccontextmanager
async def open_workspace_store(
    path: Path, busy_timeout_ms: int = 5000
) -> AsyncIterator[SqliteWorkspaceStore]:
    """The SQLite workspace store on `path`, closed on exit."""
    store = SqliteWorkspaceStore(path, busy_timeout_ms)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
