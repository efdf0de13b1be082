"""Full-text search over sessions: what of a log is searchable, the index's
storage interface, and the follower that keeps it in step with the log.

The index is derived data: rows of text (a session's title, its prompts,
its answers, the paths its tools touched) cut from events, with the log
position it has read up to. `SearchIndex` feeds it from the log of all
sessions, from that position on, so a restart resumes where it stopped and
an index that is missing (a new file, a new schema, another INDEX_VERSION)
is rebuilt from position 0. One ahead of the log is not (deleting the newest
session lowers the log's last position): a log restored from an older copy
needs its index file deleted (or the search tables dropped) by hand. Every search
first brings the index up to the log's last position, so it sees every
append that was answered before it (while a rebuild runs, it waits
FRESH_WAIT_S at most, then answers from what is indexed so far).

Scope is a search's first condition: a caller (the gateway) passes the
sessions an account may see (its workspaces' members, narrowed by the
workspace and archived filters) and the store applies them in the one query
that ranks, so another account's session is never ranked, let alone shown.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agenthost.sessionlog.v1 import events_pb2, session_log_pb2

from agenthost_core import folds
from services.common.errors import BadPageToken, InvalidRequest

log = logging.getLogger(__name__)

Event = events_pb2.Event

TITLE, PROMPT, ANSWER, PATH = "title", "prompt", "answer", "path"
KINDS = (TITLE, PROMPT, ANSWER, PATH)
# The tools whose `path` argument names a file they read or wrote; what
# commands change is listed by the turn's checkpoint event instead (a
# command line says little about the files it touches).
FILE_TOOLS = frozenset({"read_file", "write_file", "edit_file"})
# Indexed of one text at most (PostgreSQL's tsvector holds 1 MiB).
MAX_TEXT_CHARS = 100_000
# Snippets mark what matched between these (private-use characters, taken
# out of indexed text first).
MARK_START, MARK_END = "\ue000", "\ue001"
# Events indexed per store transaction while catching up.
CATCH_UP_BATCH = 2000
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
# A query's longest accepted length (characters), as the protos say.
MAX_QUERY_CHARS = 500
WORD = re.compile(r"\w", re.UNICODE)
# How long a search waits for the index to reach the log before it answers
# from what is indexed (only a rebuild takes longer).
FRESH_WAIT_S = 2.0
# How long the follower lets appends gather before it indexes them: one round
# (a read of the log, a transaction of the index) for all of them rather than
# one an append. Searches do not wait for it: each catches up first.
FOLLOW_DELAY_S = 0.5
# Bumped when what is indexed changes: an index of another version is rebuilt.
INDEX_VERSION = 1


@dataclass(frozen=True)
class Document:
    """One searchable text of a session, from the event at `seq`."""

    session_id: str
    seq: int
    kind: str
    text: str
    # Several texts of one event (a checkpoint's paths) are told apart by `part`.
    part: int = 0


@dataclass(frozen=True)
class Touch:
    """A session's times as the events read say (microseconds)."""

    session_id: str
    first_us: int
    last_us: int


@dataclass(frozen=True)
class Batch:
    """What one run of the log adds to the index."""

    documents: list[Document]
    touches: list[Touch]
    # Sessions whose earlier title rows the batch's titles replace.
    retitled: set[str]


@dataclass(frozen=True)
class SearchQuery:
    text: str
    # The sessions searched: nothing outside them is ranked or returned.
    scope: Sequence[str]
    created_after_us: int | None = None
    created_before_us: int | None = None
    updated_after_us: int | None = None
    updated_before_us: int | None = None
    limit: int = DEFAULT_PAGE_SIZE
    # Keyset: hits ranked after this (score, session id).
    after: tuple[float, str] | None = None


# What an open end of a date range is, in microseconds, on both backends.
NO_LOWER, NO_UPPER = -(2**63), 2**63 - 1


def query_params(query: SearchQuery, terms: str, scope: Any) -> dict[str, Any]:
    """The ranking query's parameters, named alike in each backend's SQL;
    `scope` as that backend binds a list of ids."""
    return {
        "terms": terms,
        "scope": scope,
        "created_after": _or(query.created_after_us, NO_LOWER),
        "created_before": _or(query.created_before_us, NO_UPPER),
        "updated_after": _or(query.updated_after_us, NO_LOWER),
        "updated_before": _or(query.updated_before_us, NO_UPPER),
        "after_score": query.after[0] if query.after else None,
        "after_id": query.after[1] if query.after else None,
        "limit": query.limit,
    }


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


@dataclass(frozen=True)
class SnippetPart:
    text: str
    highlighted: bool


@dataclass(frozen=True)
class Hit:
    session_id: str
    # Higher is better, on each backend's own scale.
    score: float
    matched: tuple[str, ...]
    snippet_kind: str
    snippet: tuple[SnippetPart, ...]
    created_us: int
    updated_us: int


@dataclass(frozen=True)
class SearchPage:
    hits: list[Hit]
    next_token: str = ""


class SearchStore(Protocol):
    """The index's storage; SQLite FTS5 and PostgreSQL full-text search both
    pass tests/contract/test_search_store.py."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def position(self) -> int:
        """The log position indexed up to (0: nothing indexed)."""
        ...

    async def apply(self, from_position: int, to_position: int, batch: Batch) -> bool:
        """Add `batch` (the log's events after `from_position` up to
        `to_position`) in one transaction, unless the index is no longer at
        `from_position` (another replica indexed them): then False."""
        ...

    async def reset(self) -> None:
        """Forget everything: the next catch-up rebuilds from position 0."""
        ...

    async def forget(self, session_id: str) -> None:
        """The session's rows, gone (it was deleted)."""
        ...

    async def search(self, query: SearchQuery, terms: str) -> list[Hit]:
        """Hits ranked best first, at most `query.limit`, from the sessions of
        `query.scope` only; `terms` is the backend's query for `query.text`."""
        ...

    def terms(self, text: str) -> str:
        """`text` (words, "phrases", -excluded, or) as this backend's query."""
        ...


def clean(text: str) -> str:
    return text.replace(MARK_START, "").replace(MARK_END, "")[:MAX_TEXT_CHARS]


def documents(event: Event) -> list[Document]:
    """What of `event` is searchable (most events: nothing)."""
    kind = event.WhichOneof("body")
    sid, seq = event.session_id, event.seq
    title = folds.last_title([event])  # the title rule is the fold's
    if title:
        return [Document(sid, seq, TITLE, clean(title))]
    if kind == "user_message":
        message = event.user_message
        if message.source.kind == events_pb2.SOURCE_KIND_PLUGIN or not message.text.strip():
            return []  # notices and hooks' words are not the user's
        return [Document(sid, seq, PROMPT, clean(message.text))]
    if kind == "assistant_message" and event.assistant_message.text.strip():
        return [Document(sid, seq, ANSWER, clean(event.assistant_message.text))]
    if kind == "tool_call" and event.tool_call.name in FILE_TOOLS:
        path = _path_argument(event.tool_call.args_json)
        return [Document(sid, seq, PATH, clean(path))] if path else []
    if kind == "checkpoint":
        paths = dict.fromkeys(change.path for change in event.checkpoint.files)
        return [Document(sid, seq, PATH, clean(p), part) for part, p in enumerate(paths)]
    return []


def _path_argument(args_json: str) -> str:
    try:
        args = json.loads(args_json or "{}")
    except ValueError:
        return ""
    path = args.get("path") if isinstance(args, dict) else None
    return path if isinstance(path, str) else ""


def batch_of(events: Sequence[Event]) -> Batch:
    docs: list[Document] = []
    times: dict[str, list[int]] = {}
    retitled: set[str] = set()
    for event in events:
        found = documents(event)
        if any(d.kind == TITLE for d in found):
            # Only the newest title is searchable: drop those before it.
            docs = [d for d in docs if not (d.session_id == event.session_id and d.kind == TITLE)]
            retitled.add(event.session_id)
        docs += found
        at = event.time.ToMicroseconds() if event.HasField("time") else 0
        span = times.setdefault(event.session_id, [at, at])
        span[0], span[1] = min(span[0], at), max(span[1], at)
    touches = [Touch(sid, first, last) for sid, (first, last) in times.items()]
    return Batch(docs, touches, retitled)


def check_query(text: str) -> str:
    """The query, trimmed; InvalidRequest when it has nothing to search by."""
    text = text.strip()
    if not WORD.search(text):
        raise InvalidRequest("query", "needs at least one word to search for")
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidRequest("query", f"is longer than {MAX_QUERY_CHARS} characters")
    return text


@dataclass(frozen=True)
class Term:
    words: tuple[str, ...]
    excluded: bool = False
    # Joined to the term before it by OR instead of AND.
    either: bool = False


def parse_terms(text: str) -> list[Term]:
    """A query as a search box takes it (websearch_to_tsquery's syntax):
    words, "quoted phrases", -excluded words, `or` between alternatives.
    Words are runs of letters and digits, so punctuation never reaches a
    backend's query language."""
    terms: list[Term] = []
    either = False
    for match in re.finditer(r'(-?)"([^"]*)"?|(\S+)', text):
        minus, phrase, bare = match.group(1), match.group(2), match.group(3)
        if bare is not None:
            if bare.lower() == "or" and terms:
                either = True
                continue
            minus = "-" if bare.startswith("-") else ""
            phrase = bare.lstrip("-")
        words = tuple(re.findall(r"\w+", phrase or ""))
        if words:
            terms.append(Term(words, excluded=bool(minus), either=either and not minus))
        either = False
    if terms and all(t.excluded for t in terms):
        raise InvalidRequest("query", "needs a word that is not excluded")
    return terms


def fts5_terms(text: str) -> str:
    """`text` as an FTS5 query: each term a quoted phrase (FTS5 syntax never
    comes from the user), ANDed, with OR and NOT as parsed."""
    out = ""
    for term in parse_terms(text):
        phrase = '"' + " ".join(term.words) + '"'
        if term.excluded:
            out += f" NOT {phrase}"
        elif out and term.either:
            out += f" OR {phrase}"
        else:
            out += f" AND {phrase}" if out else phrase
    return out


def split_marked(marked: str) -> tuple[SnippetPart, ...]:
    """A snippet with MARK_START/MARK_END around its matches, as parts."""
    parts: list[SnippetPart] = []
    for piece in re.split(f"({MARK_START}[^{MARK_END}]*{MARK_END})", marked):
        if not piece:
            continue
        if piece.startswith(MARK_START):
            inner = piece[1:-1]
            if parts and parts[-1].highlighted:
                # Two marked words in a row: one highlight with the space kept.
                parts[-1] = SnippetPart(parts[-1].text + inner, True)
            elif inner:
                parts.append(SnippetPart(inner, True))
        else:
            parts.append(SnippetPart(piece, False))
    return tuple(parts)


def encode_token(after: tuple[float, str]) -> str:
    raw = json.dumps([after[0], after[1]]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        score, session_id = json.loads(raw)
    except (ValueError, TypeError) as error:
        raise BadPageToken(token) from error
    if not isinstance(score, int | float) or isinstance(score, bool):
        raise BadPageToken(token)
    if not isinstance(session_id, str):
        raise BadPageToken(token)
    return float(score), session_id


class LogReader(Protocol):
    """What the index reads of the log (a SessionStore has both)."""

    async def read_all(self, after_position: int, limit: int) -> list[Event]: ...

    async def last_position(self) -> int: ...


@dataclass
class SearchStats:
    events_indexed: int = 0
    searches: int = 0
    stale_answers: int = 0
    lost_races: int = 0
    errors: list[str] = field(default_factory=list)


class SearchIndex:
    """The index of one log, kept in step with it (see the module's doc)."""

    def __init__(self, log: LogReader, store: SearchStore) -> None:
        self._log = log
        self.store = store
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self.stats = SearchStats()

    async def catch_up(self) -> int:
        """Index every event up to the log's last position now; that position."""
        async with self._lock:
            target = await self._log.last_position()
            # Not "ahead of the log means rebuild": deleting the newest
            # session lowers the log's last position below the index's.
            position = await self.store.position()
            while position < target:
                events = await self._log.read_all(position, CATCH_UP_BATCH)
                if not events:
                    break
                end = events[-1].position
                if await self.store.apply(position, end, batch_of(events)):
                    self.stats.events_indexed += len(events)
                else:
                    self.stats.lost_races += 1  # another replica indexed them
                position = await self.store.position()
            return position

    def appended(self) -> None:
        """The log grew: the follower indexes the new events soon."""
        self._wake.set()

    async def follow(self, delay_s: float = FOLLOW_DELAY_S) -> None:
        """Catch up at start (a rebuild, when the index is new), then again
        `delay_s` after an append, with whatever else was appended by then,
        until cancelled."""
        while True:
            self._wake.clear()
            try:
                await self.catch_up()
            except Exception as error:  # the next search or append retries
                log.exception("search index could not catch up")
                self.stats.errors.append(str(error))
            await self._wake.wait()
            await asyncio.sleep(delay_s)

    async def forget(self, session_id: str) -> None:
        async with self._lock:
            await self.store.forget(session_id)

    async def search(self, query: SearchQuery) -> SearchPage:
        text = check_query(query.text)
        if not query.scope:
            return SearchPage([])
        try:
            async with asyncio.timeout(FRESH_WAIT_S):
                await self.catch_up()
        except TimeoutError:
            # A rebuild under way: answer from what is indexed so far (every
            # step of a catch-up is checked against the stored position, so
            # leaving one midway loses nothing).
            self.stats.stale_answers += 1
        self.stats.searches += 1
        limit = max(1, min(query.limit or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE))
        asked = SearchQuery(**{**query.__dict__, "text": text, "limit": limit + 1})
        hits = await self.store.search(asked, self.store.terms(text))
        more = len(hits) > limit
        hits = hits[:limit]
        token = encode_token((hits[-1].score, hits[-1].session_id)) if more else ""
        return SearchPage(hits, token)


MATCHES = {
    TITLE: session_log_pb2.SEARCH_MATCH_TITLE,
    PROMPT: session_log_pb2.SEARCH_MATCH_PROMPT,
    ANSWER: session_log_pb2.SEARCH_MATCH_ANSWER,
    PATH: session_log_pb2.SEARCH_MATCH_PATH,
}


# The time filters of a search request (the same names in the gateway's).
TimeFilter = Literal["created_after", "created_before", "updated_after", "updated_before"]
TIME_FILTERS: tuple[TimeFilter, ...] = (
    "created_after",
    "created_before",
    "updated_after",
    "updated_before",
)


def query_from_proto(request: session_log_pb2.SearchSessionsRequest) -> SearchQuery:
    def micros(name: TimeFilter) -> int | None:
        if not request.HasField(name):
            return None
        try:
            # Out of a Timestamp's range (years 1 to 9999) it cannot be read.
            getattr(request, name).ToDatetime()
        except (ValueError, OverflowError):
            raise InvalidRequest(name, "is not a time between the years 1 and 9999") from None
        return int(getattr(request, name).ToMicroseconds())

    return SearchQuery(
        text=request.query,
        scope=list(request.session_ids),
        created_after_us=micros("created_after"),
        created_before_us=micros("created_before"),
        updated_after_us=micros("updated_after"),
        updated_before_us=micros("updated_before"),
        limit=request.page_size if request.HasField("page_size") else DEFAULT_PAGE_SIZE,
        after=decode_token(request.page_token) if request.page_token else None,
    )


def page_to_proto(page: SearchPage) -> session_log_pb2.SearchSessionsResponse:
    reply = session_log_pb2.SearchSessionsResponse(next_page_token=page.next_token)
    for hit in page.hits:
        found = reply.hits.add(
            session_id=hit.session_id,
            score=hit.score,
            matched=[MATCHES[kind] for kind in hit.matched if kind in MATCHES],
            snippet_match=MATCHES.get(hit.snippet_kind, session_log_pb2.SEARCH_MATCH_UNSPECIFIED),
            snippet=[
                session_log_pb2.SnippetPart(text=p.text, highlighted=p.highlighted)
                for p in hit.snippet
            ],
        )
        found.created_at.FromMicroseconds(hit.created_us)
        found.updated_at.FromMicroseconds(hit.updated_us)
    return reply
