"""PostgreSQL backend of the workspace store, for stacks whose replicas
share one database (AGENTHOST_DATABASE_URL=postgresql://…).

Same tables, same statements as the SQLite backend but for PostgreSQL's
dialect; what SQLite gets from its single writer, this gets from the
constraints: the unique keys make racing creates of one workspace or one
membership keep the first, and a workspace removed while a member joins
fails the membership's foreign key on one side or the other, never leaving
a member without its workspace. A committed transaction is durable
(synchronous_commit is PostgreSQL's default), which the crash-safety
argument of session creation needs (see store.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from services.common.postgres import PostgresStore, Row

from .store import MEMBERSHIP_COLUMNS, WORKSPACE_COLUMNS, Membership, WorkspaceRecord
from .store import to_membership as _to_membership
from .store import to_workspace as _to_workspace

# Released migrations never change; a change is a new entry at the end.
TABLES = (
    """
    CREATE TABLE workspaces (
        seq BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        account_id TEXT NOT NULL,
        path TEXT NOT NULL,
        created_at_us BIGINT NOT NULL,
        UNIQUE (account_id, path)
    );
    CREATE TABLE memberships (
        seq BIGSERIAL PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces (id),
        session_id TEXT NOT NULL UNIQUE,
        cwd TEXT NOT NULL,
        archived BOOLEAN NOT NULL DEFAULT FALSE,
        created_at_us BIGINT NOT NULL
    );
    CREATE INDEX memberships_by_workspace ON memberships (workspace_id, seq);
    """,
)


class PostgresWorkspaceStore(PostgresStore):
    STORE = "workspace"
    MIGRATIONS = TABLES

    # -- workspaces ------------------------------------------------------------

    async def _insert_unless_present(
        self, insert: str, row: Sequence[Any], select: str, key: Sequence[Any]
    ) -> tuple[Row, bool]:
        """Insert `row` (an ON CONFLICT DO NOTHING statement), then read the
        stored row by `key`; whether this insert was the one stored."""
        async with self.db.transaction() as connection:
            inserted = await connection.execute(insert, row)
            # Read committed: a racing insert that won is visible to this statement.
            stored = await (await connection.execute(select, key)).fetchone()
        assert stored is not None
        return stored, inserted.rowcount == 1

    async def add_workspace(self, record: WorkspaceRecord) -> tuple[WorkspaceRecord, bool]:
        row, inserted = await self._insert_unless_present(
            f"INSERT INTO workspaces ({WORKSPACE_COLUMNS}) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (account_id, path) DO NOTHING",
            (record.id, record.account_id, record.path, record.created_at_us),
            f"SELECT {WORKSPACE_COLUMNS} FROM workspaces WHERE account_id = %s AND path = %s",
            (record.account_id, record.path),
        )
        return _to_workspace(row), inserted

    async def get_workspace(self, workspace_id: str) -> WorkspaceRecord | None:
        rows = await self.db.fetch(
            f"SELECT {WORKSPACE_COLUMNS} FROM workspaces WHERE id = %s", (workspace_id,)
        )
        return _to_workspace(rows[0]) if rows else None

    async def list_workspaces(self, account_id: str) -> list[WorkspaceRecord]:
        rows = await self.db.fetch(
            f"SELECT {WORKSPACE_COLUMNS} FROM workspaces WHERE account_id = %s ORDER BY seq",
            (account_id,),
        )
        return [_to_workspace(r) for r in rows]

    # -- memberships -------------------------------------------------------------

    async def add_membership(self, membership: Membership) -> tuple[Membership, bool]:
        m = membership
        row, inserted = await self._insert_unless_present(
            f"INSERT INTO memberships ({MEMBERSHIP_COLUMNS}) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (session_id) DO NOTHING",
            (m.workspace_id, m.session_id, m.cwd, m.archived, m.created_at_us),
            f"SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE session_id = %s",
            (m.session_id,),
        )
        return _to_membership(row), inserted

    async def get_membership(self, session_id: str) -> Membership | None:
        rows = await self.db.fetch(
            f"SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE session_id = %s", (session_id,)
        )
        return _to_membership(rows[0]) if rows else None

    async def list_memberships(self, workspace_ids: Sequence[str]) -> list[Membership]:
        # One array parameter: no limit on how many ids, unlike SQLite's IN list.
        rows = await self.db.fetch(
            f"SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE workspace_id = ANY(%s) "
            "ORDER BY seq",
            (list(workspace_ids),),
        )
        return [_to_membership(r) for r in rows]

    async def set_archived(self, session_id: str, archived: bool) -> None:
        await self.db.execute(
            "UPDATE memberships SET archived = %s WHERE session_id = %s", (archived, session_id)
        )

    async def remove_workspace_if_empty(self, workspace_id: str) -> bool:
        try:
            removed = await self.db.execute(
                "DELETE FROM workspaces WHERE id = %s AND NOT EXISTS "
                "(SELECT 1 FROM memberships WHERE workspace_id = %s)",
                (workspace_id, workspace_id),
            )
        except psycopg.errors.ForeignKeyViolation:
            # A member joined after this statement's snapshot: it keeps the workspace.
            return False
        return removed > 0

    async def remove_membership(self, session_id: str) -> None:
        await self.db.execute("DELETE FROM memberships WHERE session_id = %s", (session_id,))
