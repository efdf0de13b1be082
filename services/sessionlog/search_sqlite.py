"""The search index on SQLite: an FTS5 table (porter stemming over unicode61
words) beside the session log's file, ranked by bm25.

Derived data, in its own file (`search.db`): deleting the file, or a new
INDEX_VERSION, makes the next catch-up rebuild it from the log. Commits do
not wait for the disk (synchronous=NORMAL): what a crash loses is indexed
again from the position that was durable.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from services.common.sqlite import connect_wal, in_transaction

from .search import (
    INDEX_VERSION,
    MARK_END,
    MARK_START,
    Batch,
    Hit,
    SearchQuery,
    fts5_terms,
    query_params,
    split_marked,
)

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS search_meta (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL,
    position INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS search_sessions (
    session_id TEXT PRIMARY KEY,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS search_text USING fts5(
    text, session_id UNINDEXED, kind UNINDEXED, seq UNINDEXED, part UNINDEXED,
    tokenize = 'porter unicode61'
);
-- Which rows of search_text are a session's (of a kind): FTS5 cannot index
-- its unindexed columns, and a title replaced or a session deleted would
-- otherwise scan the whole table.
CREATE TABLE IF NOT EXISTS search_rows (
    row INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS search_rows_by_session ON search_rows (session_id, kind);
"""
DROP = """
DROP TABLE IF EXISTS search_meta;
DROP TABLE IF EXISTS search_sessions;
DROP TABLE IF EXISTS search_text;
DROP TABLE IF EXISTS search_rows;
"""
# Words around a match in a snippet.
SNIPPET_TOKENS = 16

# Ranked within the scope (a condition of the match, before any grouping),
# grouped per session (its best row), then its times read and filtered
# before the page is cut.
RANKED = """
SELECT g.session_id, g.score, g.best, g.kinds, s.created_us, s.updated_us
FROM (
    SELECT t.session_id AS session_id, -min(t.rank) AS score, t.rowid AS best,
           group_concat(DISTINCT t.kind) AS kinds
    FROM search_text t
    WHERE search_text MATCH :terms
      AND t.session_id IN (SELECT value FROM json_each(:scope))
    GROUP BY t.session_id
) g JOIN search_sessions s ON s.session_id = g.session_id
WHERE s.created_us BETWEEN :created_after AND :created_before
  AND s.updated_us BETWEEN :updated_after AND :updated_before
  AND (:after_id IS NULL OR g.score < :after_score
       OR (g.score = :after_score AND g.session_id > :after_id))
ORDER BY g.score DESC, g.session_id
LIMIT :limit
"""
SNIPPETS = f"""
SELECT rowid, kind, snippet(search_text, 0, '{MARK_START}', '{MARK_END}', '…', {SNIPPET_TOKENS})
    AS marked
FROM search_text WHERE search_text MATCH :terms
  AND rowid IN (SELECT value FROM json_each(:rows))
"""


class SqliteSearchStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="search-db")
        self._conn: sqlite3.Connection | None = None

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = await self._run(lambda: connect_wal(self.path, "NORMAL"))
        await self._run(self._migrate)

    def _migrate(self) -> None:
        db = self._db()
        db.executescript(SCHEMA)
        row = db.execute("SELECT version FROM search_meta WHERE id = 1").fetchone()
        if row is not None and row["version"] != INDEX_VERSION:
            db.executescript(DROP)  # indexed by other rules: rebuilt from the log
            db.executescript(SCHEMA)
            row = None
        if row is None:
            db.execute(
                "INSERT INTO search_meta (id, version, position) VALUES (1, ?, 0)", (INDEX_VERSION,)
            )

    async def close(self) -> None:
        if self._conn is not None:
            await self._run(self._conn.close)
            self._conn = None
        self._executor.shutdown(wait=True)

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("search store is not open")
        return self._conn

    async def _run(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    async def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(lambda: in_transaction(self._db(), work))

    async def position(self) -> int:
        def work() -> int:
            row = self._db().execute("SELECT position FROM search_meta WHERE id = 1").fetchone()
            return int(row["position"])

        return await self._run(work)

    async def apply(self, from_position: int, to_position: int, batch: Batch) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT position FROM search_meta WHERE id = 1").fetchone()
            if int(row["position"]) != from_position:
                return False
            for session_id in batch.retitled:
                _delete(db, "session_id = ? AND kind = 'title'", (session_id,))
            first = db.execute("SELECT coalesce(max(row), 0) + 1 FROM search_rows").fetchone()[0]
            rows = list(enumerate(batch.documents, start=first))
            db.executemany(
                "INSERT INTO search_text (rowid, text, session_id, kind, seq, part) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(n, d.text, d.session_id, d.kind, d.seq, d.part) for n, d in rows],
            )
            db.executemany(
                "INSERT INTO search_rows (row, session_id, kind) VALUES (?, ?, ?)",
                [(n, d.session_id, d.kind) for n, d in rows],
            )
            db.executemany(
                "INSERT INTO search_sessions (session_id, created_us, updated_us) "
                "VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
                "created_us = min(created_us, excluded.created_us), "
                "updated_us = max(updated_us, excluded.updated_us)",
                [(t.session_id, t.first_us, t.last_us) for t in batch.touches],
            )
            db.execute("UPDATE search_meta SET position = ? WHERE id = 1", (to_position,))
            return True

        return await self._transaction(work)

    async def reset(self) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM search_text")
            db.execute("DELETE FROM search_rows")
            db.execute("DELETE FROM search_sessions")
            db.execute("UPDATE search_meta SET position = 0 WHERE id = 1")

        await self._transaction(work)

    async def forget(self, session_id: str) -> None:
        def work(db: sqlite3.Connection) -> None:
            _delete(db, "session_id = ?", (session_id,))
            db.execute("DELETE FROM search_sessions WHERE session_id = ?", (session_id,))

        await self._transaction(work)

    def terms(self, text: str) -> str:
        return fts5_terms(text)

    async def search(self, query: SearchQuery, terms: str) -> list[Hit]:
        params = query_params(query, terms, json.dumps(list(query.scope)))

        def work() -> list[Hit]:
            db = self._db()
            ranked = db.execute(RANKED, params).fetchall()
            if not ranked:
                return []
            rows = json.dumps([r["best"] for r in ranked])
            marked = {
                r["rowid"]: (r["kind"], r["marked"])
                for r in db.execute(SNIPPETS, {"terms": terms, "rows": rows})
            }
            hits = []
            for r in ranked:
                kind, snippet = marked.get(r["best"], ("", ""))
                hits.append(
                    Hit(
                        session_id=r["session_id"],
                        score=float(r["score"]),
                        matched=tuple(sorted(set(r["kinds"].split(",")))),
                        snippet_kind=kind,
                        snippet=split_marked(snippet),
                        created_us=r["created_us"],
                        updated_us=r["updated_us"],
                    )
                )
            return hits

        return await self._run(work)


def _delete(db: sqlite3.Connection, where: str, params: tuple[str, ...]) -> None:
    """The rows of search_text that search_rows says match `where`."""
    db.execute(
        f"DELETE FROM search_text WHERE rowid IN (SELECT row FROM search_rows WHERE {where})",
        params,
    )
    db.execute(f"DELETE FROM search_rows WHERE {where}", params)
