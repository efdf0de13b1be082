"""A full-text search over 10,000 sessions of 100 events (smoke: 50 of 20),
p50, against a single-row indexed lookup (a session's summary by its
primary key) on the same SQLite session log in the same run.

The log is filled in bulk: its tables made by the store, then every
session's row and events written in one transaction of plain inserts (as
the store writes them, bodies and all), so building 1M events takes seconds
rather than 10,000 fsynced appends. The index is then built as a stack
builds it when it is missing: `SearchIndex.catch_up` reads the log from
position 0 (the time it takes is in the details). Each session has a title,
prompts and answers of eight words drawn from a vocabulary of 5,000 (so a
word is in about 1% of the sessions), and `read_file` calls with a path.

A search is what `SearchSessions` asks of the log (search.py): the scope of
every session (one account owning all 10,000), one word of the vocabulary
(another each time), a page of 20 with snippets, after checking the index
is up to the log. Report only: the issue sets no target."""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
from pathlib import Path

from agenthost.sessionlog.v1 import events_pb2 as ev

from bench.harness import Sizes
from bench.ratio import Figure, interleaved, latency_side
from services.sessionlog.search import SearchIndex, SearchQuery
from services.sessionlog.search_sqlite import SqliteSearchStore
from services.sessionlog.sqlite_store import SqliteSessionStore
from services.sessionlog.store import event_row

NAME = "session_search"
VOCABULARY = 5_000
SENTENCE = 8
PAGE = 20


def _words(n: int) -> list[str]:
    """Distinct pronounceable words (what a tokenizer and a stemmer keep)."""
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su", "do", "ga"]
    words = []
    for k in range(n):
        parts, m = [], k + len(syllables)
        while m:
            m, r = divmod(m, len(syllables))
            parts.append(syllables[r])
        words.append("".join(parts) + "x")
    return words


def _session_events(rng: random.Random, words: list[str], count: int, at_us: int) -> list[ev.Event]:
    def text() -> str:
        return " ".join(rng.choice(words) for _ in range(SENTENCE))

    user = ev.MessageSource(kind=ev.SOURCE_KIND_USER)
    events = [ev.Event(session_title=ev.SessionTitle(title=text()))]
    while len(events) < count:
        kind = len(events) % 3
        if kind == 1:
            events.append(ev.Event(user_message=ev.UserMessage(text=text(), source=user)))
        elif kind == 2:
            events.append(ev.Event(assistant_message=ev.AssistantMessage(text=text())))
        else:
            path = f"src/{rng.choice(words)}/{rng.choice(words)}.py"
            call = ev.ToolCall(call_id="c", name="read_file", args_json=json.dumps({"path": path}))
            events.append(ev.Event(tool_call=call))
    for seq, event in enumerate(events):
        event.id = f"e{seq}"
        event.time.FromMicroseconds(at_us + seq)
    return events


def _fill(path: Path, sessions: int, events: int) -> list[str]:
    """Every session and its events, in one transaction; their ids."""
    rng = random.Random(7)
    words = _words(VOCABULARY)
    db = sqlite3.connect(path, isolation_level=None)
    ids = []
    try:
        db.execute("BEGIN")
        for n in range(sessions):
            session_id = f"s-{n:08d}"
            at_us = 1_700_000_000_000_000 + n * 1_000
            made = _session_events(rng, words, events, at_us)
            db.execute(
                "INSERT INTO sessions (id, cwd, created_at_us, updated_at_us, last_seq, blank, "
                "title) VALUES (?, ?, ?, ?, ?, 0, ?)",
                (
                    session_id,
                    "/src/app",
                    at_us,
                    at_us + events,
                    events - 1,
                    made[0].session_title.title,
                ),
            )
            db.executemany(
                "INSERT INTO events (session_id, seq, event_id, kind, is_message, body) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [event_row(session_id, seq, event) for seq, event in enumerate(made)],
            )
            ids.append(session_id)
        db.execute("COMMIT")
    finally:
        db.close()
    return ids


async def run(sizes: Sizes, data_dir: Path) -> Figure:
    sessions, events = sizes.search_sessions, sizes.search_events
    log_file = data_dir / "sessionlog.db"
    made = SqliteSessionStore(log_file)
    await made.open()  # its tables
    await made.close()
    started = time.perf_counter()
    ids = await asyncio.to_thread(_fill, log_file, sessions, events)
    filled_s = time.perf_counter() - started

    store = SqliteSessionStore(log_file)
    search = SqliteSearchStore(data_dir / "search.db")
    await store.open()
    await search.open()
    try:
        index = SearchIndex(store, search)
        started = time.perf_counter()
        await index.catch_up()
        indexed_s = time.perf_counter() - started
        rng = random.Random(11)
        words = _words(VOCABULARY)
        hits: list[int] = []

        async def find() -> None:
            page = await index.search(SearchQuery(rng.choice(words), ids, limit=PAGE))
            hits.append(len(page.hits))

        async def lookup() -> None:
            assert await store.summary(rng.choice(ids)) is not None

        measured, baseline = await interleaved(find, lookup, sizes.rounds, sizes.per_round)
    finally:
        await search.close()
        await store.close()
    return Figure(
        name=f"search over {sessions:,} sessions of {events} events, a page of {PAGE}",
        compared="p50",
        unit="ms",
        measured=latency_side("SearchIndex.search (FTS5, bm25, snippets)", measured, "p50"),
        baseline=latency_side("a session's row by its primary key", baseline, "p50"),
        target=None,
        notes=[
            f"the log filled in {filled_s:.1f} s (bulk inserts), the index built from it in "
            f"{indexed_s:.1f} s ({index.stats.events_indexed:,} events read); "
            f"{sum(hits) / max(len(hits), 1):.1f} hits a search on average",
        ],
        details={"filled_s": filled_s, "indexed_s": indexed_s},
    )
