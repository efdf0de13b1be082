"""The storage interface of the session log; every backend passes tests/contract.

A store's sessions are the durable ones: a lazily created session is kept
apart (pending.py: in the domain's memory, or, for a SharedStore, in a table
of pending sessions every replica sees and no listing reads), and its header
reaches the store with the first append, which writes header and events in
one transaction (a shared store drops the pending row in it). Nor does a
store check integers: the domain (SessionLog) has every caller-chosen seq,
position and limit inside what both backends hold (services/common/ranges.py)
before it calls one, so a new backend adds SQL, never range checks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

from agenthost.sessionlog.v1 import events_pb2, session_log_pb2

from agenthost_core.folds import summary_change

from .leases import Lease, LeaseChange
from .port import AppendResult, Direction, ReadResult, StoredImage, TailPage

Event = events_pb2.Event
SessionSummary = session_log_pb2.SessionSummary

# Event kinds counted when a tail page is cut on message boundaries.
MESSAGE_KINDS = frozenset({"user_message", "assistant_message"})


@dataclass(frozen=True)
class SessionHeader:
    """The immutable part of a session, fixed at creation."""

    id: str
    cwd: str
    created_at_us: int
    forked_from: str = ""


class PageKey(NamedTuple):
    """Where a page of sessions ends: its last row's update time and id
    (the next page starts after it, in the order of `sessions_by_update`)."""

    updated_at_us: int
    id: str


def summary_from_row(row: Mapping[str, Any]) -> SessionSummary:
    """A `sessions` row (the same columns in every backend) as a summary."""
    summary = SessionSummary(
        id=row["id"],
        cwd=row["cwd"],
        title=row["title"],
        last_seq=row["last_seq"],
        blank=bool(row["blank"]),
        forked_from=row["forked_from"],
        preview=row["preview"],
        running=bool(row["running"]),
        waiting=row["waiting"],
    )
    summary.created_at.FromMicroseconds(row["created_at_us"])
    summary.updated_at.FromMicroseconds(row["updated_at_us"])
    return summary


TouchValues = tuple[bool, str | None, str | None, bool | None, str | None]
# The parameters of every backend's statements, in their column order:
# INSERT INTO sessions (id, cwd, created_at_us, updated_at_us, forked_from),
SessionRow = tuple[str, str, int, int, str]
# INSERT INTO events (session_id, seq, event_id, kind, is_message, body),
EventRow = tuple[str, int, str, str, bool, bytes]
# UPDATE sessions SET last_seq, updated_at_us, blank, title, preview, running,
# waiting WHERE id.
TouchRow = tuple[int, int, bool, str | None, str | None, bool | None, str | None, str]


def touch_values(events: Sequence[Event]) -> TouchValues:
    """What an append changes in its session's row, for every backend's
    UPDATE: (still blank, title, preview, running, waiting), None meaning
    unchanged (the rules are the folds')."""
    change = summary_change(events)
    return (not change.ends_blank, change.title, change.preview, change.running, change.waiting)


def session_row(header: SessionHeader, now_us: int) -> SessionRow:
    return (header.id, header.cwd, header.created_at_us, now_us, header.forked_from)


def event_row(session_id: str, seq: int, event: Event) -> EventRow:
    kind = event_kind(event)
    return (session_id, seq, event.id, kind, kind in MESSAGE_KINDS, storable(event))


def touch_row(session_id: str, events: Sequence[Event], last_seq: int, now_us: int) -> TouchRow:
    return (last_seq, now_us, *touch_values(events), session_id)


# Every backend's tables of images: the bytes once per digest, and which
# session holds which (a session reads only its own; a fork holds its
# source's; a deletion drops the bytes no other session holds).
IMAGE_TABLES = """
CREATE TABLE IF NOT EXISTS images (
    digest TEXT PRIMARY KEY,
    media_type TEXT NOT NULL,
    data {blob} NOT NULL
);
CREATE TABLE IF NOT EXISTS session_images (
    session_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (session_id, digest)
);
CREATE INDEX IF NOT EXISTS session_images_by_digest ON session_images (digest);
"""
# The statements, in every backend's order of parameters ({p}: its placeholder).
PUT_IMAGE = (
    "INSERT INTO images (digest, media_type, data) VALUES ({p}, {p}, {p}) "
    "ON CONFLICT (digest) DO NOTHING"
)
LINK_IMAGE = (
    "INSERT INTO session_images (session_id, digest) VALUES ({p}, {p}) "
    "ON CONFLICT (session_id, digest) DO NOTHING"
)
READ_IMAGE = (
    "SELECT i.media_type, i.data FROM session_images s JOIN images i ON i.digest = s.digest "
    "WHERE s.session_id = {p} AND s.digest = {p}"
)
COPY_IMAGES = (
    "INSERT INTO session_images (session_id, digest) "
    "SELECT {p}, digest FROM session_images WHERE session_id = {p} "
    "ON CONFLICT (session_id, digest) DO NOTHING"
)
# (session_id, session_id, session_id): the bytes only this session held, then its links.
DROP_IMAGES = (
    "DELETE FROM images WHERE digest IN "
    "(SELECT digest FROM session_images WHERE session_id = {p}) AND NOT EXISTS "
    "(SELECT 1 FROM session_images o WHERE o.digest = images.digest AND o.session_id <> {p})"
)
UNLINK_IMAGES = "DELETE FROM session_images WHERE session_id = {p}"


@dataclass(frozen=True)
class StateCheckpoint:
    """The session's fold (folds.dump_state) as of `seq`, in the format
    `version` of folds.STATE_VERSION."""

    seq: int
    version: int
    state: bytes


def event_from_row(session_id: str, seq: int, position: int, body: bytes) -> Event:
    event = Event.FromString(body)
    event.session_id, event.seq, event.position = session_id, seq, position
    return event


def storable(event: Event) -> bytes:
    """The event as stored: seq, session id and position live in columns."""
    stored = Event()
    stored.CopyFrom(event)
    for name in ("seq", "session_id", "position"):
        stored.ClearField(name)
    return stored.SerializeToString()


def event_kind(event: Event) -> str:
    kind = event.WhichOneof("body")
    if kind is None:
        raise ValueError("event has no body")
    return kind


class SessionStore(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def get_header(self, session_id: str) -> SessionHeader | None: ...

    async def summary(self, session_id: str) -> SessionSummary | None: ...

    async def append(
        self,
        header: SessionHeader,
        events: Sequence[Event],
        expected_last_seq: int | None,
        now_us: int,
        lease_token: int | None = None,
    ) -> AppendResult:
        """Atomically append a non-empty batch whose events all have ids.

        Creates the session row from `header` when absent. A batch whose ids
        are all present returns the original seqs (duplicate=True); a batch
        mixing old and new ids raises EventIdConflict; a `lease_token` that
        is not the session's current one raises LeaseLost; a mismatching
        expected_last_seq raises WrongExpectedSeq. Idempotency is checked
        first, so the retry of a batch that succeeded is not a conflict.

        `events` are handed over: the store may keep them once committed
        (SQLite's log tail does, their session, seq and position set), so
        the caller makes them for this call and never changes them after."""
        ...

    async def change_lease(self, session_id: str, change: LeaseChange) -> Lease:
        """Apply `change` to the session's lease row in one transaction,
        ordered with the append waves (leases.py); answers what it answers."""
        ...

    async def read(
        self, session_id: str, from_seq: int | None, direction: Direction, limit: int
    ) -> ReadResult: ...

    async def tail_page(
        self, session_id: str, before_seq: int | None, message_limit: int
    ) -> TailPage:
        """The page and the session's summary, last_seq read with it from
        one row; SessionNotFound when the session is not stored."""
        ...

    async def read_all(self, after_position: int, limit: int) -> list[Event]:
        """Events of every session with position > after_position, in order."""
        ...

    async def last_position(self) -> int: ...

    async def list_sessions(
        self,
        limit: int,
        after: PageKey | None,
        session_ids: Sequence[str],
        running_only: bool = False,
    ) -> tuple[list[SessionSummary], bool]:
        """Most recently updated first, then by id, from the first after
        `after` (the last row of the page before) on; the bool says whether
        more follow. Only `session_ids` when given; only sessions with an
        open turn when `running_only`."""
        ...

    async def fork(
        self, source_id: str, up_to_seq: int | None, header: SessionHeader, now_us: int
    ) -> SessionSummary:
        """Copy the source's events up to `up_to_seq` (inclusive) into a new
        durable session described by `header`."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Remove the session, its events, its checkpoint and its images
        (their bytes when no other session holds them); False when it was
        not stored."""
        ...

    async def put_images(self, session_id: str, images: Sequence[StoredImage]) -> None:
        """Keep the images (once per digest) and link them to the session,
        stored or not yet (a lazy session's first message sends them)."""
        ...

    async def read_image(self, session_id: str, digest: str) -> StoredImage | None:
        """The image when the session holds it (another session's never)."""
        ...

    async def probe(self) -> None:
        """A write that reaches the storage, or StorageUnavailable: how a
        service whose storage failed learns it may serve again."""
        ...

    async def load_checkpoint(self, session_id: str) -> StateCheckpoint | None: ...

    async def save_checkpoint(self, session_id: str, checkpoint: StateCheckpoint) -> None:
        """Keep `checkpoint` unless a newer one is stored; a session that is not
        stored (deleted meanwhile) gets none."""
        ...


# A session nobody appended to for a day was abandoned (a client writes to a
# session in its first turn, minutes after creating it); without a bound the
# ones created and never used would pile up, in a shared table for good.
PENDING_TTL_US = 24 * 3600 * 1_000_000


class PendingSessions(Protocol):
    """The sessions created and not yet appended to (pending.py keeps them in
    memory; a SharedStore in a table every replica sees)."""

    async def add(self, header: SessionHeader) -> SessionHeader:
        """Keep `header` unless its id is pending already; the header pending
        under its id now (ours, or the one created first). Drops the sessions
        created PENDING_TTL_US before `header` first."""
        ...

    async def get(self, session_id: str) -> SessionHeader | None: ...

    async def discard(self, session_id: str) -> bool:
        """Forget the session; False when it was not pending."""
        ...

    async def made_durable(self, session_id: str) -> None:
        """The session's first append was stored: it is pending no more."""
        ...


# What `SharedStore.changes` yields first, once it listens: any session may
# have changed before then (the listener is new, or was lost and made again).
EVERY_SESSION = ""


@runtime_checkable
class SharedStore(Protocol):
    """A store several session-log replicas write to: it reports the sessions
    other replicas appended to, so local subscribers wake up, and keeps the
    lazy sessions where every replica finds them."""

    @property
    def pending(self) -> PendingSessions:
        """The sessions created through any replica and not yet appended to."""
        ...

    def changes(self) -> AsyncIterator[str]:
        """EVERY_SESSION once listening, then each session appended to; ends
        or raises when the listener is lost."""
        ...
