"""The session log: lazy sessions, optimistic appends, reads and subscriptions.

Plain Python over a SessionStore; the servicer is a thin gRPC adapter. A
session created and never appended to is lazy (pending.py): kept in memory
over a store only this process writes, in the store's pending table over a
shared one (so every replica serves it), never in the durable sessions.
Every integer a caller chooses is checked here (services/common/ranges.py)
before a store sees it, so every backend answers the same.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TypeVar

from agenthost.sessionlog.v1 import events_pb2, session_log_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from agenthost_core import folds, images
from services.common import page_tokens, ranges
from services.common.errors import (
    ImageNotFound,
    ImageRefused,
    InvalidArgument,
    InvalidRequest,
    LeaseLost,
    NotReady,
    SessionConflict,
    SessionNotFound,
)
from services.common.ranges import INT64_MAX
from services.common.recent import Recent

from . import leases
from .leases import Lease
from .pending import MemoryPendingSessions
from .port import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_MESSAGE_LIMIT,
    AppendResult,
    BatchItem,
    CaughtUp,
    Direction,
    Heartbeat,
    ReadResult,
    StoredImage,
    SubscriptionItem,
    TailPage,
    flattened,
)
from .search import SearchIndex, SearchStore, page_to_proto, query_from_proto
from .sqlite_store import SqliteSessionStore
from .store import (
    EVERY_SESSION,
    Event,
    PageKey,
    PendingSessions,
    SessionHeader,
    SessionStore,
    SessionSummary,
    SharedStore,
    StateCheckpoint,
    event_kind,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

# Events read per store query while a subscriber catches up.
CATCH_UP_BATCH = 500
# A session's state checkpoint is renewed each time its seqs pass a multiple
# of this, so a cold load folds about this many events at most, whatever the
# length of the session; the renewal folds as many, so it costs O(1) per event.
CHECKPOINT_EVERY = 256
HEADERS_CACHED = 10_000
# Sessions whose fold the log keeps in step with their appends, once renewed
# or loaded (the least recently appended to go first): a due renewal saves it
# as it is, with nothing read back from the store and nothing decoded again.
FOLDS_KEPT = 1024
# The longest lease a caller may ask for (the contract's ttl_ms bound).
MAX_LEASE_S = 3600.0
# Pauses before listening again to a shared store that lost its listener:
# the first, and the longest it doubles to.
LISTEN_RETRY_S = (0.1, 5.0)


@dataclass
class LogStats:
    """What the log did, for tests and benchmarks that count work, not time."""

    # Events of one session the store handed to its readers (reads, pages,
    # subscribers, state loads): what opening a session costs.
    events_read: int = 0
    # Events handed to followers of every session (SubscribeAll).
    feed_events_read: int = 0
    checkpoints_saved: int = 0


def now_us() -> int:
    return time.time_ns() // 1000


def generate_session_id() -> str:
    return f"s-{uuid.uuid4().hex}"


class ChangeSignal:
    """Wakes waiters after an append. Waiters take `waiter()` before reading the
    store, so an append that lands between their read and their wait is never
    missed (the event they hold is already set)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def waiter(self) -> asyncio.Event:
        return self._event

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()


class SessionLog:
    def __init__(
        self,
        store: SessionStore,
        clock: Callable[[], int] = now_us,
        search: SearchStore | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        # The full-text index of the log's sessions (search.py), when kept.
        self.search = None if search is None else SearchIndex(store, search)
        # Created but never appended: not durable, never listed.
        self._lazy: PendingSessions = (
            store.pending if isinstance(store, SharedStore) else MemoryPendingSessions()
        )
        self._session_signals: dict[str, ChangeSignal] = {}
        self._all_signal = ChangeSignal()
        self.stats = LogStats()
        # Sessions whose checkpoint fell CHECKPOINT_EVERY events behind.
        self._checkpoints_due: dict[str, None] = {}
        self._checkpoint_wake = asyncio.Event()
        # Set before shutdown: subscriptions end instead of waiting for appends.
        self._ending = False
        # Headers never change, so one read serves every later append; only
        # where no other replica can delete a session behind our back.
        self._headers = Recent[str, SessionHeader](
            0 if isinstance(store, SharedStore) else HEADERS_CACHED
        )
        # Folds kept, each with the position of the last event it folded.
        # Where another replica may append, delete or reuse an id behind our
        # back (a shared store), a kept fold is only where the next load
        # starts: it reads on from the fold's last event, which must still be
        # the one folded (positions are never reused), else folds afresh.
        self._shared = isinstance(store, SharedStore)
        self._kept_folds = Recent[str, KeptFold](FOLDS_KEPT)

    # -- sessions ----------------------------------------------------------------

    async def create_session(self, session_id: str | None, cwd: str) -> tuple[SessionSummary, bool]:
        session_id = session_id or generate_session_id()
        existing = await self._header(session_id)
        if existing is None:
            header = SessionHeader(session_id, cwd, self._clock())
            existing = await self._lazy.add(header)
            if existing == header:
                return _lazy_summary(header), True
        if existing.cwd != cwd:
            raise SessionConflict(session_id, cwd)
        return await self.get_session(session_id), False

    async def get_session(self, session_id: str) -> SessionSummary:
        found = await self._locate(session_id, self._store.summary)
        if found is None:
            raise SessionNotFound(session_id)
        return _lazy_summary(found.header) if isinstance(found, Lazy) else found

    async def list_sessions(
        self,
        page_size: int = 100,
        page_token: str = "",
        session_ids: Sequence[str] = (),
        *,
        running_only: bool = False,
    ) -> tuple[list[SessionSummary], str]:
        # The store asks for one row more than the page to learn whether more follow.
        size = ranges.page_size(page_size, "page_size", INT64_MAX - 1)
        after = None
        if page_token:
            neg_updated_us, last_id = page_tokens.decode(page_token)
            after = PageKey(-neg_updated_us, last_id)
        sessions, more = await self._store.list_sessions(size, after, session_ids, running_only)
        if not (more and sessions):
            return sessions, ""
        last = sessions[-1]
        return sessions, page_tokens.encode((-last.updated_at.ToMicroseconds(), last.id))

    async def search_sessions(
        self, request: session_log_pb2.SearchSessionsRequest
    ) -> session_log_pb2.SearchSessionsResponse:
        """Full-text search over the request's sessions (search.py)."""
        if self.search is None:
            raise NotReady("session search (this log keeps no index)")
        return page_to_proto(await self.search.search(query_from_proto(request)))

    async def fork(
        self, session_id: str, up_to_seq: int | None = None, new_session_id: str | None = None
    ) -> SessionSummary:
        if up_to_seq is not None:
            ranges.int64(up_to_seq, "up_to_seq")
        source, source_lazy = await self._found(session_id)
        fork_id = new_session_id or generate_session_id()
        if await self._header(fork_id) is not None:
            raise SessionConflict(fork_id, source.cwd)
        header = SessionHeader(fork_id, source.cwd, self._clock(), forked_from=session_id)
        self._kept_folds.pop(fork_id, None)
        if source_lazy:  # nothing to copy: the fork is lazy too
            if await self._lazy.add(header) != header:
                raise SessionConflict(fork_id, source.cwd)
            return _lazy_summary(header)
        summary = await self._store.fork(session_id, up_to_seq, header, self._clock())
        self._fire(fork_id)
        return summary

    async def delete_session(self, session_id: str) -> None:
        """The session and its log, gone; subscribers of it are woken (their
        next read finds nothing)."""
        lazy = await self._lazy.discard(session_id)
        self._headers.pop(session_id, None)
        self._kept_folds.pop(session_id, None)
        if not await self._store.delete(session_id) and not lazy:
            raise SessionNotFound(session_id)
        if self.search is not None:
            await self.search.forget(session_id)
        self._fire(session_id)

    # -- images --------------------------------------------------------------------

    async def put_images(
        self, session_id: str, inputs: Sequence[events_pb2.ImageInput]
    ) -> list[events_pb2.ImageRef]:
        """Check and keep a prompt's images for the session (agenthost_core/
        images.py: by their bytes, within the limits; a digest must name one
        the session holds); their references, in order. Nothing is kept
        when one is refused."""
        await self._found(session_id)
        too_much = images.too_much([len(given.data) for given in inputs])
        if too_much:
            raise ImageRefused(f"#{len(inputs)}", too_much)
        refs: list[events_pb2.ImageRef] = []
        new: dict[str, StoredImage] = {}
        for index, given in enumerate(inputs):
            name = given.name or f"#{index + 1}"
            if given.WhichOneof("source") == "digest":
                found = await self._store.read_image(session_id, given.digest)
                if found is None:
                    raise ImageNotFound(given.digest)
                image = found
            else:
                why = images.refusal(given.data)
                if why:
                    raise ImageRefused(name, why)
                media_type = images.media_type_of(given.data) or ""
                image = StoredImage(images.digest_of(given.data), media_type, given.data)
                new[image.digest] = image
            refs.append(
                events_pb2.ImageRef(
                    digest=image.digest,
                    media_type=image.media_type,
                    size=len(image.data),
                    name=given.name,
                )
            )
        if new:
            await self._store.put_images(session_id, list(new.values()))
        return refs

    async def read_image(self, session_id: str, digest: str) -> StoredImage:
        """An image the session holds (ImageNotFound otherwise)."""
        found = await self._store.read_image(session_id, digest)
        if found is None:
            raise ImageNotFound(digest)
        return found

    # -- append --------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Sequence[Event],
        expected_last_seq: int | None = None,
        *,
        lease_token: int | None = None,
    ) -> AppendResult:
        if expected_last_seq is not None:
            ranges.int64(expected_last_seq, "expected_last_seq", low=-1)
        if lease_token is not None:
            ranges.int64(lease_token, "lease_token", low=1)
        header, lazy = await self._found(session_id)
        if not events:
            last_seq = -1 if lazy else (await self.get_session(session_id)).last_seq
            return AppendResult([], last_seq, duplicate=False)
        now = self._clock()
        stamp = Timestamp()
        stamp.FromMicroseconds(now)
        batch = [_prepared(event, stamp) for event in events]
        _refuse_repeated_ids(batch)
        result = await self._store.append(header, batch, expected_last_seq, now, lease_token)
        if lazy:
            await self._lazy.made_durable(session_id)
        if not result.duplicate:
            self._fire(session_id)
            self._keep_folding(session_id, batch, result.seqs)
            if _passes_checkpoint(result.seqs):
                self._checkpoints_due[session_id] = None
                self._checkpoint_wake.set()
        return result

    # -- leases --------------------------------------------------------------------

    async def acquire_lease(self, session_id: str, owner: str, ttl_s: float) -> Lease:
        """The session's lease after trying to take it (leases.acquire): the
        caller's when its `owner` is the caller."""
        await self._require_header(session_id)
        change = leases.acquire(session_id, owner, _ttl_us(ttl_s), self._clock())
        return await self._store.change_lease(session_id, change)

    async def renew_lease(self, session_id: str, owner: str, token: int, ttl_s: float) -> Lease:
        """Extended by `ttl_s` from now, or LeaseLost."""
        ranges.int64(token, "token", low=1)
        change = leases.renew(session_id, owner, token, _ttl_us(ttl_s), self._clock())
        return await self._store.change_lease(session_id, change)

    async def release_lease(self, session_id: str, owner: str, token: int) -> bool:
        """False when `token` was no longer the owner's current one."""
        ranges.int64(token, "token", low=1)
        try:
            await self._store.change_lease(session_id, leases.release(session_id, owner, token))
        except LeaseLost:
            return False
        return True

    # -- reads ---------------------------------------------------------------------

    async def read(
        self,
        session_id: str,
        *,
        from_seq: int | None = None,
        direction: Direction = Direction.FORWARD,
        limit: int = 1000,
    ) -> ReadResult:
        if from_seq is not None:
            ranges.int64(from_seq, "from_seq")
        ranges.page_size(limit, "limit")

        async def stored(session_id: str) -> ReadResult | None:
            # No header check first (as tail_page): the read asks the row anyway.
            try:
                return await self._store.read(session_id, from_seq, direction, limit)
            except SessionNotFound:
                return None

        found = await self._locate(session_id, stored)
        if found is None:
            raise SessionNotFound(session_id)
        if isinstance(found, Lazy):
            return ReadResult([], -1)
        return self._counted(found)

    async def tail_page(
        self,
        session_id: str,
        *,
        before_seq: int | None = None,
        message_limit: int = DEFAULT_MESSAGE_LIMIT,
    ) -> TailPage:
        if before_seq is not None:
            ranges.int64(before_seq, "before_seq")
        ranges.page_size(message_limit, "message_limit")

        async def stored_page(session_id: str) -> TailPage | None:
            # No header check first: the page reads the session's row anyway
            # (one store trip less where headers are not cached, e.g. PostgreSQL).
            try:
                return await self._store.tail_page(session_id, before_seq, message_limit)
            except SessionNotFound:
                return None

        found = await self._locate(session_id, stored_page)
        if found is None:
            raise SessionNotFound(session_id)
        if isinstance(found, Lazy):
            return TailPage([], False, 0, -1, _lazy_summary(found.header))
        self.stats.events_read += len(found.events)
        return found

    # -- folded state ------------------------------------------------------------------

    async def load_state(self, session_id: str) -> folds.SessionState:
        """The session's fold as of its last event: its checkpoint, if any,
        and the events after it (never the whole log of a long session)."""

        async def stored(session_id: str) -> folds.SessionState | None:
            try:
                return await self._fold_tail(session_id, save_after=CHECKPOINT_EVERY)
            except SessionNotFound:
                return None

        found = await self._locate(session_id, stored)
        if found is None:
            raise SessionNotFound(session_id)
        return folds.SessionState() if isinstance(found, Lazy) else found

    async def maintain_checkpoints(self) -> None:
        """Renew the checkpoints appends made due, off the append path (runs
        until cancelled)."""
        while True:
            await self._checkpoint_wake.wait()
            self._checkpoint_wake.clear()
            await self.renew_due_checkpoints()

    async def renew_due_checkpoints(self) -> None:
        while self._checkpoints_due:
            session_id = next(iter(self._checkpoints_due))
            del self._checkpoints_due[session_id]
            try:
                kept = None if self._shared else self._kept_folds.recall(session_id)
                if kept is None:
                    # A shared store's kept fold lags its appends: read on, and save.
                    await self._fold_tail(session_id, save_after=0 if self._shared else 1)
                else:
                    await self._save_checkpoint(session_id, kept.state)
            except SessionNotFound:
                pass  # deleted since: nothing to keep
            except Exception as error:  # the next due renewal tries again
                log.warning("checkpoint of %s not renewed: %s", session_id, error)

    async def _fold_tail(self, session_id: str, save_after: int) -> folds.SessionState:
        """The kept fold, else the checkpoint, and the events after it; saved
        again when at least `save_after` events were folded. The result is
        kept, to be folded on as appends come."""
        kept = self._kept_folds.recall(session_id)
        if kept is None:
            kept = KeptFold(await self._checkpointed(session_id), 0)
            check = False
        else:
            check = self._shared
        state, position = kept
        # A shared store's read starts at the fold's last event: its position
        # checks a kept fold, and tells a loaded one's.
        overlap = self._shared and state.last_seq >= 0
        folded = 0
        while True:
            start = state.last_seq if overlap else state.last_seq + 1
            result = await self._store.read(session_id, start, Direction.FORWARD, CATCH_UP_BATCH)
            self._counted(result)
            events = result.events
            if overlap:
                overlap = False
                same = bool(events) and events[0].seq == state.last_seq
                if check and not (same and events[0].position == position):
                    # Deleted and made again through another replica since.
                    self._kept_folds.pop(session_id, None)
                    return await self._fold_tail(session_id, save_after)
                if same:
                    position, events = events[0].position, events[1:]
            state = folds.fold_events(state, events)
            folded += len(events)
            if events:
                position = events[-1].position
            if len(result.events) < CATCH_UP_BATCH:
                break
        if folded >= save_after:
            await self._save_checkpoint(session_id, state)
        if position or not self._shared:
            self._kept_folds.remember(session_id, KeptFold(state, position))
        return state

    async def _checkpointed(self, session_id: str) -> folds.SessionState:
        checkpoint = await self._store.load_checkpoint(session_id)
        if checkpoint is not None and checkpoint.version == folds.STATE_VERSION:
            return folds.load_state(checkpoint.state)
        return folds.SessionState()

    async def _save_checkpoint(self, session_id: str, state: folds.SessionState) -> None:
        saved = StateCheckpoint(state.last_seq, folds.STATE_VERSION, folds.dump_state(state))
        await self._store.save_checkpoint(session_id, saved)
        self.stats.checkpoints_saved += 1

    def _keep_folding(self, session_id: str, events: Sequence[Event], seqs: list[int]) -> None:
        """Fold an append just committed into the session's kept fold, if
        one is kept and the append follows it; else the fold is no longer
        the log's (its appends came back out of their order), and is dropped."""
        if self._shared:
            return  # kept as it is: the next load reads on from its last event
        kept = self._kept_folds.pop(session_id, None)
        if kept is None or seqs[0] != kept.state.last_seq + 1:
            return
        try:
            self._kept_folds[session_id] = KeptFold(folds.fold_events(kept.state, events, seqs), 0)
        except Exception:
            # The append is committed: its caller must not see this. The
            # next renewal folds from the checkpoint and meets it there.
            log.warning("the kept fold of %s dropped", session_id, exc_info=True)

    def _counted(self, result: ReadResult) -> ReadResult:
        self.stats.events_read += len(result.events)
        return result

    # -- subscriptions ---------------------------------------------------------------

    async def subscribe(
        self, session_id: str, after_seq: int = -1, heartbeat_s: float = DEFAULT_HEARTBEAT_S
    ) -> AsyncIterator[SubscriptionItem]:
        ranges.int64(after_seq, "after_seq")
        await self._require_header(session_id)
        cursor = after_seq

        async def read_next() -> list[Event]:
            # No seq follows the largest one a store holds (and cursor + 1 would not fit).
            if cursor == INT64_MAX or await self._is_lazy(session_id):
                return []
            result = await self._store.read(
                session_id, cursor + 1, Direction.FORWARD, CATCH_UP_BATCH
            )
            return self._counted(result).events

        signal = self._session_signals.setdefault(session_id, ChangeSignal())
        async for item in _follow(read_next, signal, heartbeat_s, self._is_ending):
            if isinstance(item, list):
                for event in item:
                    cursor = event.seq
                    yield event
            elif isinstance(item, CaughtUp):
                yield CaughtUp(last_seq=cursor, position=0)
            else:
                yield item

    def subscribe_all(
        self,
        after_position: int = 0,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        from_end: bool = False,
    ) -> AsyncIterator[SubscriptionItem]:
        return flattened(self.subscribe_all_batches(after_position, heartbeat_s, from_end))

    async def subscribe_all_batches(
        self,
        after_position: int = 0,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        from_end: bool = False,
    ) -> AsyncGenerator[BatchItem, None]:
        """`subscribe_all` with the events each store read returned kept
        together (never an empty list): what the service sends a follower
        that asks for batches."""
        ranges.int64(after_position, "after_position")
        cursor = await self._store.last_position() if from_end else after_position

        async def read_next() -> list[Event]:
            events = await self._store.read_all(cursor, CATCH_UP_BATCH)
            self.stats.feed_events_read += len(events)
            return events

        async for item in _follow(read_next, self._all_signal, heartbeat_s, self._is_ending):
            if isinstance(item, list):
                cursor = item[-1].position
            elif isinstance(item, CaughtUp):
                item = CaughtUp(last_seq=-1, position=cursor)
            yield item

    async def end_streams(self) -> None:
        """Before shutdown: every subscription ends once it has sent what it
        read (its client resumes from its cursor, after the restart or on
        another replica), so the server does not wait out its grace for them."""
        self._ending = True
        for signal in self._session_signals.values():
            signal.fire()
        self._all_signal.fire()

    def _is_ending(self) -> bool:
        return self._ending

    async def follow_shared_store(self) -> None:
        """Wake local subscribers on appends other replicas make (runs until
        cancelled; returns at once for a store only this process writes). A
        lost listener (PostgreSQL restarted) is made again, and each time it
        listens every subscriber reads again: what other replicas appended
        meanwhile arrives then, not at the next heartbeat."""
        if not isinstance(self._store, SharedStore):
            return
        delay = LISTEN_RETRY_S[0]
        while True:
            try:
                async for session_id in self._store.changes():
                    if session_id == EVERY_SESSION:
                        delay = LISTEN_RETRY_S[0]
                        self._fire_all()
                    else:
                        self._fire(session_id)
            except Exception as error:  # the server went away: listen again
                log.warning(
                    "lost the shared store's change listener (%s); again in %ss", error, delay
                )
            await asyncio.sleep(delay)  # a pause before listening again, not synchronisation
            delay = min(delay * 2, LISTEN_RETRY_S[1])

    # -- internals ---------------------------------------------------------------------

    def _fire_all(self) -> None:
        for signal in self._session_signals.values():
            signal.fire()
        self._all_signal.fire()
        if self.search is not None:
            self.search.appended()

    def _fire(self, session_id: str) -> None:
        signal = self._session_signals.get(session_id)
        if signal is not None:
            signal.fire()
        self._all_signal.fire()
        if self.search is not None:
            self.search.appended()

    async def _locate(
        self, session_id: str, durable: Callable[[str], Awaitable[T | None]]
    ) -> T | Lazy | None:
        """What `durable` finds of the stored session, else its lazy header,
        else None. The store first: a durable session, the common case,
        costs one read. A lazy session only ever becomes durable (one
        transaction), so one in neither place at the second read was made
        durable meanwhile (the store has it now) or does not exist."""
        found = await durable(session_id)
        if found is not None:
            return found
        pending = await self._lazy.get(session_id)
        if pending is not None:
            return Lazy(pending)
        return await durable(session_id)

    async def _stored_header(self, session_id: str) -> SessionHeader | None:
        header = self._headers.recall(session_id)
        if header is None:
            header = await self._store.get_header(session_id)
            if header is not None and self._headers.limit:
                self._headers.remember(session_id, header)
        return header

    async def _header(self, session_id: str) -> SessionHeader | None:
        found = await self._locate(session_id, self._stored_header)
        return found.header if isinstance(found, Lazy) else found

    async def _found(self, session_id: str) -> tuple[SessionHeader, bool]:
        """The session's header and whether it is lazy, or SessionNotFound."""
        found = await self._locate(session_id, self._stored_header)
        if found is None:
            raise SessionNotFound(session_id)
        return (found.header, True) if isinstance(found, Lazy) else (found, False)

    async def _require_header(self, session_id: str) -> SessionHeader:
        return (await self._found(session_id))[0]

    async def _is_lazy(self, session_id: str) -> bool:
        return (await self._found(session_id))[1]


class KeptFold(NamedTuple):
    """A session's fold kept by the log, and the position of the last event
    it folded (0: not known, never for a fold a shared store's log keeps)."""

    state: folds.SessionState
    position: int


@dataclass(frozen=True)
class Lazy:
    """A session found pending, not stored (_locate)."""

    header: SessionHeader


async def _follow(
    read_next: Callable[[], Awaitable[list[Event]]],
    signal: ChangeSignal,
    heartbeat_s: float,
    ending: Callable[[], bool],
) -> AsyncIterator[BatchItem]:
    """Catch up from the store, mark the switch to live once, then follow the
    store as appends signal it; heartbeats while nothing happens. Events come
    as each read returned them. Ends (after what it read) once `ending` says
    the log is shutting down."""
    caught_up = False
    while not ending():
        waiter = signal.waiter()
        events = await read_next()
        if events:
            yield events
        if len(events) == CATCH_UP_BATCH:
            continue
        if not caught_up:
            caught_up = True
            yield CaughtUp(last_seq=-1, position=0)
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a
        # cancel that lands as the signal fires, and the subscriber's
        # owner (e.g. a stopping projection engine) then waits forever.
        try:
            async with asyncio.timeout(heartbeat_s):
                await waiter.wait()
        except TimeoutError:
            yield Heartbeat()


def _ttl_us(ttl_s: float) -> int:
    if not 0 < ttl_s <= MAX_LEASE_S:
        raise InvalidRequest("ttl", f"must be more than 0 and at most {MAX_LEASE_S} s")
    return round(ttl_s * 1_000_000)


def _passes_checkpoint(seqs: Sequence[int]) -> bool:
    """The appended seqs reach a multiple of CHECKPOINT_EVERY."""
    return bool(seqs) and seqs[0] // CHECKPOINT_EVERY != (seqs[-1] + 1) // CHECKPOINT_EVERY


def _prepared(event: Event, now: Timestamp) -> Event:
    """A copy of `event` as the log stores it: with an id and a time (the
    append's, `now`, where the writer gave none)."""
    event_kind(event)  # a body is required
    prepared = Event()
    prepared.CopyFrom(event)
    if not prepared.id:
        # As random as a uuid4's hex, without making a UUID for it.
        prepared.id = f"e-{secrets.token_hex(16)}"
    if not prepared.HasField("time"):
        prepared.time.CopyFrom(now)
    return prepared


def _refuse_repeated_ids(batch: Sequence[Event]) -> None:
    seen: set[str] = set()
    for index, event in enumerate(batch):
        if event.id in seen:
            raise InvalidArgument(
                "DUPLICATE_EVENT_ID",
                f"event id {event.id!r} appears twice in one batch",
                event_id=event.id,
                field=f"events[{index}].id",
            )
        seen.add(event.id)


def _lazy_summary(header: SessionHeader) -> SessionSummary:
    summary = SessionSummary(
        id=header.id, cwd=header.cwd, last_seq=-1, blank=True, forked_from=header.forked_from
    )
    summary.created_at.FromMicroseconds(header.created_at_us)
    summary.updated_at.FromMicroseconds(header.created_at_us)
    return summary


@asynccontextmanager
async def open_session_log(path: Path) -> AsyncIterator[SessionLog]:
    """An embedded session log on a SQLite file, closed on exit."""
    store = SqliteSessionStore(path)
    await store.open()
    try:
        yield SessionLog(store)
    finally:
        await store.close()
