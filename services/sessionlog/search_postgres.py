"""The search index on PostgreSQL: a tsvector (english) per text under a GIN
index, queried with websearch_to_tsquery, ranked by ts_rank, snippets by
ts_headline; shared by every session-log replica.

Text is indexed with every run of punctuation read as a space, as SQLite's
unicode61 reads it, so `src/auth/login.py` is found by `login` on both
backends (PostgreSQL's own parser would keep the path one token). A path's
snippet is the path, its matching parts marked here (ts_headline reads the
path as one token too). Replicas catching up together each index a run only
if the position they read is still the index's (apply locks the row).
"""

from __future__ import annotations

import re

from services.common.postgres import PostgresStore

from .search import (
    INDEX_VERSION,
    MARK_END,
    MARK_START,
    PATH,
    Batch,
    Hit,
    SearchQuery,
    SnippetPart,
    parse_terms,
    query_params,
    split_marked,
)

# Released migrations never change; a change is a new entry at the end.
TABLES = (
    """
    CREATE TABLE search_meta (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        version INTEGER NOT NULL,
        position BIGINT NOT NULL
    );
    CREATE TABLE search_sessions (
        session_id TEXT PRIMARY KEY,
        created_us BIGINT NOT NULL,
        updated_us BIGINT NOT NULL
    );
    CREATE TABLE search_text (
        id BIGSERIAL PRIMARY KEY,
        session_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        kind TEXT NOT NULL,
        part INTEGER NOT NULL,
        text TEXT NOT NULL,
        tsv TSVECTOR GENERATED ALWAYS AS
            (to_tsvector('english', regexp_replace(text, '[\\W_]+', ' ', 'g'))) STORED
    );
    CREATE INDEX search_text_tsv ON search_text USING GIN (tsv);
    CREATE INDEX search_text_session ON search_text (session_id, kind);
    """,
)

RANKED = """
WITH q AS (SELECT websearch_to_tsquery('english', %(terms)s) AS q),
matched AS (
    SELECT t.id, t.session_id, t.kind, ts_rank(t.tsv, q.q) AS rank
    FROM search_text t CROSS JOIN q JOIN search_sessions s ON s.session_id = t.session_id
    WHERE t.tsv @@ q.q AND t.session_id = ANY(%(scope)s)
      AND s.created_us BETWEEN %(created_after)s AND %(created_before)s
      AND s.updated_us BETWEEN %(updated_after)s AND %(updated_before)s
),
grouped AS (
    SELECT session_id, max(rank)::float8 AS score, array_agg(DISTINCT kind) AS kinds,
           (array_agg(id ORDER BY rank DESC, id))[1] AS best
    FROM matched GROUP BY session_id
)
SELECT g.session_id, g.score, g.kinds, g.best, s.created_us, s.updated_us
FROM grouped g JOIN search_sessions s ON s.session_id = g.session_id
WHERE %(after_id)s::text IS NULL OR g.score < %(after_score)s::float8
   OR (g.score = %(after_score)s::float8 AND g.session_id > %(after_id)s::text)
ORDER BY g.score DESC, g.session_id
LIMIT %(limit)s
"""
SNIPPETS = f"""
SELECT id, kind, text, ts_headline('english', text, websearch_to_tsquery('english', %(terms)s),
    'StartSel={MARK_START}, StopSel={MARK_END}, MaxWords=24, MinWords=8, MaxFragments=1')
    AS marked
FROM search_text WHERE id = ANY(%(rows)s)
"""


class PostgresSearchStore(PostgresStore):
    STORE = "search"
    MIGRATIONS = TABLES

    async def open(self) -> None:
        await super().open()
        async with self.db.transaction() as connection:
            rows = await (await connection.execute("SELECT version FROM search_meta")).fetchall()
            if rows and rows[0]["version"] != INDEX_VERSION:
                await connection.execute("TRUNCATE search_text, search_sessions")
                await connection.execute(
                    "UPDATE search_meta SET version = %s, position = 0", (INDEX_VERSION,)
                )
            elif not rows:
                await connection.execute(
                    "INSERT INTO search_meta (id, version, position) VALUES (1, %s, 0) "
                    "ON CONFLICT (id) DO NOTHING",
                    (INDEX_VERSION,),
                )

    async def position(self) -> int:
        rows = await self.db.fetch("SELECT position FROM search_meta WHERE id = 1")
        return int(rows[0]["position"])

    async def apply(self, from_position: int, to_position: int, batch: Batch) -> bool:
        async with self.db.transaction() as connection:
            cursor = await connection.execute(
                "SELECT position FROM search_meta WHERE id = 1 FOR UPDATE"
            )
            row = await cursor.fetchone()
            if row is None or int(row["position"]) != from_position:
                return False
            for session_id in sorted(batch.retitled):
                await connection.execute(
                    "DELETE FROM search_text WHERE session_id = %s AND kind = 'title'",
                    (session_id,),
                )
            if batch.documents:
                async with connection.cursor() as cur:
                    await cur.executemany(
                        "INSERT INTO search_text (session_id, seq, kind, part, text) "
                        "VALUES (%s, %s, %s, %s, %s)",
                        [(d.session_id, d.seq, d.kind, d.part, d.text) for d in batch.documents],
                    )
            if batch.touches:
                async with connection.cursor() as cur:
                    await cur.executemany(
                        "INSERT INTO search_sessions (session_id, created_us, updated_us) "
                        "VALUES (%s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET "
                        "created_us = LEAST(search_sessions.created_us, excluded.created_us), "
                        "updated_us = GREATEST(search_sessions.updated_us, excluded.updated_us)",
                        [
                            (t.session_id, t.first_us, t.last_us)
                            for t in sorted(batch.touches, key=lambda t: t.session_id)
                        ],
                    )
            await connection.execute(
                "UPDATE search_meta SET position = %s WHERE id = 1", (to_position,)
            )
            return True

    async def reset(self) -> None:
        async with self.db.transaction() as connection:
            await connection.execute("SELECT position FROM search_meta WHERE id = 1 FOR UPDATE")
            await connection.execute("TRUNCATE search_text, search_sessions")
            await connection.execute("UPDATE search_meta SET position = 0 WHERE id = 1")

    async def forget(self, session_id: str) -> None:
        async with self.db.transaction() as connection:
            await connection.execute("DELETE FROM search_text WHERE session_id = %s", (session_id,))
            await connection.execute(
                "DELETE FROM search_sessions WHERE session_id = %s", (session_id,)
            )

    def terms(self, text: str) -> str:
        """websearch_to_tsquery's syntax, from the words parse_terms keeps."""
        out: list[str] = []
        for term in parse_terms(text):
            words = " ".join(term.words)
            phrase = f'"{words}"' if len(term.words) > 1 else words
            if term.excluded:
                out.append(f"-{phrase}")
            else:
                if term.either and out:
                    out.append("or")
                out.append(phrase)
        return " ".join(out)

    async def search(self, query: SearchQuery, terms: str) -> list[Hit]:
        params = query_params(query, terms, list(query.scope))
        async with self.db.session() as connection:
            ranked = await (await connection.execute(RANKED, params)).fetchall()
            if not ranked:
                return []
            rows = [r["best"] for r in ranked]
            cursor = await connection.execute(SNIPPETS, {"terms": terms, "rows": rows})
            marked = {r["id"]: r for r in await cursor.fetchall()}
        words = [w.lower() for t in parse_terms(terms) if not t.excluded for w in t.words]
        hits = []
        for r in ranked:
            best = marked.get(r["best"])
            kind = best["kind"] if best else ""
            if best is None:
                snippet: tuple[SnippetPart, ...] = ()
            elif kind == PATH:
                snippet = _marked_path(best["text"], words)
            else:
                snippet = split_marked(best["marked"])
            hits.append(
                Hit(
                    session_id=r["session_id"],
                    score=float(r["score"]),
                    matched=tuple(sorted(r["kinds"])),
                    snippet_kind=kind,
                    snippet=snippet,
                    created_us=r["created_us"],
                    updated_us=r["updated_us"],
                )
            )
        return hits


def _marked_path(path: str, words: list[str]) -> tuple[SnippetPart, ...]:
    """The path with the parts a query word matches (stemming aside: the
    part starts with the word, or the word with the part) marked."""

    def matches(part: str) -> bool:
        low = part.lower()
        return any(low.startswith(w) or (len(low) >= 3 and w.startswith(low)) for w in words)

    marked = re.sub(
        r"[^\W_]+", lambda m: f"{MARK_START}{m[0]}{MARK_END}" if matches(m[0]) else m[0], path
    )
    return split_marked(marked)
