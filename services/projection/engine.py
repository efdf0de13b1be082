"""The projection engine: folds every session's events into its units' views.

A background feeder follows the session log's all-sessions subscription from
the position it consumed last (kept in the checkpoint store). Each session's
folded state lives in an LRU cache with a watermark (last folded seq); on a
miss it is restored from its checkpoint and only the events after the
watermark are read from the log. Every event is applied at most once per
state: an event at or below the watermark is skipped, an event past it first
folds the gap from the log. So the subscription and `get`'s catch-up reads
may overlap freely, and the stored position is only a hint of where to
resume: a re-delivered event is skipped, a missed one is read on demand.

Checkpoints are taken every `checkpoint_every` events per session, or
after more when its last checkpoint was big (CHECKPOINT_BYTES_PER_EVENT), on
eviction and on stop; never per event. Saving one may suspend (PostgreSQL),
so folding goes on meanwhile: a session is counted as saved only up to the
events its checkpoint held, and an evicted session stays reachable until its
checkpoint is stored (a read meanwhile takes it back rather than restore an
older checkpoint and fold again what watchers were already sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Collection, Iterable
from dataclasses import dataclass
from itertools import groupby, islice

from services.common.errors import DomainError, Unavailable
from services.common.tasks import spawn
from services.sessionlog import port
from services.sessionlog.port import BatchItem, SessionLogPort

from .checkpoint_store import CheckpointStore
from .errors import ProjectionFailed, WatchLagged
from .folding import SessionProjection
from .keyed_lock import KeyedLock
from .model import CaughtUp, Change, SessionChange, Snapshot, WatchItem
from .registry import UnitInfo, UnitRegistry

logger = logging.getLogger(__name__)

READ_PAGE = 1000  # the largest page the session log serves


@dataclass
class EngineStats:
    # Events delivered by the all-sessions subscription.
    events_received: int = 0
    # Events read back with `log.read`: cold loads, refolds, gaps, catch-up.
    events_read: int = 0
    # Calls of `log.read`.
    log_reads: int = 0
    # Events applied to a session's units (each at most once per state).
    events_folded: int = 0
    # Delivered by the subscription but already folded from a read.
    events_skipped: int = 0
    # Session checkpoints written.
    checkpoints_written: int = 0


class _Closed:
    def __init__(self, error: DomainError | None) -> None:
        self.error = error


class _Watcher:
    """The live part of one watch: a bounded buffer of changes."""

    def __init__(self, after_seq: int, capacity: int) -> None:
        # Unbounded queue, bounded by `offer`, so closing always fits.
        self._queue: asyncio.Queue[Change | _Closed] = asyncio.Queue()
        self._after_seq = after_seq
        self._capacity = capacity

    def offer(self, changes: list[Change]) -> bool:
        """Queue the changes of events folded together, all or none; False
        when over capacity."""
        fresh = [change for change in changes if change.seq > self._after_seq]
        if self._queue.qsize() + len(fresh) > self._capacity:
            return False
        for change in fresh:
            self._queue.put_nowait(change)
        return True

    def close(self, error: DomainError | None) -> None:
        self._queue.put_nowait(_Closed(error))

    async def next(self) -> Change | None:
        item = await self._queue.get()
        if isinstance(item, _Closed):
            if item.error is not None:
                raise item.error
            return None
        return item


# A session's checkpoints write at most this much per event folded between
# them: a long session's state (a growing list of its turns) is saved after
# proportionally more events, so its checkpoints cost about as much per event
# as a short one's, rather than more with every turn. What a restart refolds
# grows the same way: a 1 MB state comes back from at most 4,096 events.
CHECKPOINT_BYTES_PER_EVENT = 256


class ProjectionEngine:
    def __init__(
        self,
        log: SessionLogPort,
        registry: UnitRegistry,
        store: CheckpointStore,
        *,
        checkpoint_every: int = 500,
        max_cached_sessions: int = 10_000,
        watch_buffer: int = 1024,
        resubscribe_delays_s: tuple[float, float] = (0.2, 5.0),
    ) -> None:
        self._log = log
        # Units are fixed for the engine's life: a cached session knows no others.
        self._units = registry.units()
        self._unit_info = registry.describe()
        self._store = store
        self._checkpoint_every = checkpoint_every
        self._max_cached = max_cached_sessions
        self._watch_buffer = watch_buffer
        self._resubscribe_delays_s = resubscribe_delays_s
        self._cache: OrderedDict[str, SessionProjection] = OrderedDict()
        # Evicted, their checkpoints being saved.
        self._saving: dict[str, SessionProjection] = {}
        self._locks = KeyedLock()
        self._watchers: dict[str, set[_Watcher]] = {}
        self._all_watchers: set[asyncio.Queue[SessionChange | _Closed]] = set()
        # Known once start() has read the stored one.
        self._position = 0
        self._saved_position = 0
        self._caught_up = asyncio.Event()
        self._feeder: asyncio.Task[None] | None = None
        # Set by stop(): a watch opened afterwards would never be closed.
        self._stopped = False
        self.stats = EngineStats()

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self._stopped = False
        if self._feeder is None:
            stored = await self._store.load_position()
            self._position = max(self._position, stored)
            self._saved_position = max(self._saved_position, stored)
            self._feeder = spawn(self._feed(), name="projection-feeder")

    async def stop(self) -> None:
        """Stop following the log, checkpoint every cached session and end
        every watch with UNAVAILABLE (clients reconnect with their last seq)."""
        self._stopped = True
        feeder, self._feeder = self._feeder, None
        if feeder is not None:
            feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feeder
        try:
            await self._checkpoint(self._cache.values(), position=self._position)
        except Exception:
            # Watches still end; the next start folds from older checkpoints.
            logger.exception("could not checkpoint on stop")
        self._close_all_watchers(_shutting_down())

    async def __aenter__(self) -> ProjectionEngine:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def wait_caught_up(self) -> None:
        """Return once the feeder has consumed everything the log had when it
        subscribed (a readiness signal)."""
        await self._caught_up.wait()

    @property
    def position(self) -> int:
        """The global log position the feeder has consumed."""
        return self._position

    def units(self) -> list[UnitInfo]:
        return list(self._unit_info)

    # -- queries ---------------------------------------------------------------------

    async def get(
        self, session_id: str, keys: Collection[str] | None = None, min_seq: int | None = None
    ) -> Snapshot:
        """The views of `session_id` as of the log's current end, or as of
        `min_seq` or later when that is given (the caller read the log that
        far: folded views as new need no read). Unknown keys are left out (a
        unit this deployment does not mount has no value). Raises
        SessionNotFound (without `min_seq`)."""
        async with self._locks.hold(session_id):
            projection = await self._current(session_id, min_seq)
            return Snapshot(projection.watermark, projection.values(keys))

    async def watch(self, session_id: str, after_seq: int = -1) -> AsyncGenerator[WatchItem, None]:
        """Changes caused by events with seq > after_seq: first the current
        view of each unit changed since then (latest wins, oldest first), then
        `CaughtUp`, then live changes in seq order (of events folded together,
        such as one append's, the latest of each view). Resuming with the last
        seq seen yields no duplicate and no gap. Raises SessionNotFound, and
        WatchLagged when the consumer falls `watch_buffer` changes behind."""
        async with self._locks.hold(session_id):
            projection = await self._current(session_id)
            backlog = projection.changes_after(after_seq)
            as_of_seq = projection.watermark
            if self._stopped:
                raise _shutting_down()
            # Registered under the lock: nothing folds between snapshot and here.
            watcher = _Watcher(max(after_seq, as_of_seq), self._watch_buffer)
            self._watchers.setdefault(session_id, set()).add(watcher)
        try:
            for change in backlog:
                yield change
            yield CaughtUp(as_of_seq)
            while (live := await watcher.next()) is not None:
                yield live
        finally:
            self._forget_watcher(session_id, watcher)

    async def watch_all(self) -> AsyncGenerator[CaughtUp | list[SessionChange], None]:
        """Every change of every session from now on (of events folded
        together, the latest of each view): first CaughtUp (the watch is
        live), then changes in the order they were folded, those
        waiting together as one list (never empty). Live only: a watcher
        that falls `watch_buffer` changes behind is ended with WatchLagged and
        reads what it needs with `get`."""
        if self._stopped:
            raise _shutting_down()
        queue: asyncio.Queue[SessionChange | _Closed] = asyncio.Queue()
        self._all_watchers.add(queue)
        try:
            yield CaughtUp(-1)
            while True:
                changes, closed = _waiting(await queue.get(), queue)
                if changes:
                    yield changes
                if closed is not None:
                    if closed.error is not None:
                        raise closed.error
                    return
        finally:
            self._all_watchers.discard(queue)

    # -- folding ---------------------------------------------------------------------

    async def _current(self, session_id: str, min_seq: int | None = None) -> SessionProjection:
        """The session's projection, caught up with the end of its log. The
        one read this costs when nothing is new is what makes a get right
        after an append reflect it; a caller that knows how far the log went
        (`min_seq`) spares it when the feed already folded that far."""
        projection = await self._cached_or_restored(session_id)
        if min_seq is None or projection.watermark < min_seq:
            await self._catch_up(projection)
        await self._remember(projection)
        return projection

    async def _cached_or_restored(self, session_id: str) -> SessionProjection:
        projection = self._cache.get(session_id) or self._saving.get(session_id)
        if projection is None:
            checkpoint = await self._store.load_session(session_id)
            projection = SessionProjection.restore(session_id, self._units, checkpoint)
        return projection

    async def _catch_up(
        self, projection: SessionProjection, through_seq: int | None = None
    ) -> None:
        """Fold the logged events after the watermark: up to `through_seq`, or
        to the end of the log."""
        while through_seq is None or projection.watermark < through_seq:
            before = projection.watermark
            wanted = READ_PAGE if through_seq is None else min(READ_PAGE, through_seq - before)
            result = await self._log.read(projection.session_id, from_seq=before + 1, limit=wanted)
            self.stats.log_reads += 1
            self.stats.events_read += len(result.events)
            for event in result.events:
                self._fold(projection, event)
            self._notify(projection, since=before)
            await self._checkpoint_if_due(projection)
            if projection.watermark >= result.last_seq or projection.watermark == before:
                return

    def _fold(self, projection: SessionProjection, event: port.Event) -> bool:
        """Fold `event` (its caller notifies); False when it was folded before."""
        if event.seq <= projection.watermark:
            return False
        try:
            projection.apply(event)
        except ProjectionFailed as failure:
            # Some units may have folded the event and others not: drop it all.
            self._discard(projection.session_id, failure)
            raise
        self.stats.events_folded += 1
        return True

    # -- the feeder ------------------------------------------------------------------

    async def _feed(self) -> None:
        first_delay, max_delay = self._resubscribe_delays_s
        delay = first_delay
        while True:
            stream = self._log.subscribe_all_batches(after_position=self._position)
            try:
                async for item in stream:
                    await self._consume(item)
                    delay = first_delay
            except Unavailable as error:
                # Not serving yet (a deployment starts its services in no
                # order) or restarting: expected, and retried.
                logger.warning("session log unavailable (%s); resubscribing in %ss", error, delay)
            except Exception:
                logger.exception("session log subscription failed; resubscribing")
            finally:
                await _close_stream(stream)
            # Not for synchronisation: a pause before resubscribing to a failing log.
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay)

    async def _consume(self, item: BatchItem) -> None:
        if isinstance(item, list):
            self.stats.events_received += len(item)
            for session_id, run in groupby(item, key=_session_of):
                await self._feed_run(session_id, list(run))
            await self._advance_position(item[-1].position)
        elif isinstance(item, port.CaughtUp):
            await self._advance_position(item.position)
            await self._save_position()
            self._caught_up.set()
        else:  # a heartbeat: a quiet moment to persist the cursor
            await self._save_position()

    async def _feed_run(self, session_id: str, events: list[port.Event]) -> None:
        """Fold consecutive events of one session, as the log has them, under
        one hold of its lock: a batch of a hundred appended together costs
        one lookup, one check of the checkpoint and one trip through the
        cache, not a hundred, and the watchers get the latest of each view it
        changed, not every step on the way."""
        try:
            async with self._locks.hold(session_id):
                projection = await self._cached_or_restored(session_id)
                since = projection.watermark
                for event in events:
                    if event.seq - 1 > projection.watermark:  # a gap: read it first
                        self._notify(projection, since)  # what came before it, first
                        await self._catch_up(projection, through_seq=event.seq - 1)
                        since = projection.watermark
                    if not self._fold(projection, event):
                        self.stats.events_skipped += 1
                self._notify(projection, since)
                await self._checkpoint_if_due(projection)
                await self._remember(projection)
        except Unavailable as error:  # the log or the checkpoints restarting: transient
            logger.warning("could not fold the events of %r: %s", session_id, error)
        except Exception:
            # Skip rather than stall every session on one: the next event or
            # read of this session folds what was missed from the log.
            logger.exception("could not fold the events of session %r", session_id)

    async def _advance_position(self, position: int) -> None:
        self._position = max(self._position, position)
        if self._position - self._saved_position >= self._checkpoint_every:
            await self._save_position()

    async def _save_position(self) -> None:
        position = self._position
        if position != self._saved_position:
            await self._store.save_position(position)
            self._saved_position = max(self._saved_position, position)

    # -- cache and checkpoints -----------------------------------------------------------

    async def _remember(self, projection: SessionProjection) -> None:
        self._cache[projection.session_id] = projection
        self._cache.move_to_end(projection.session_id)
        self._saving.pop(projection.session_id, None)
        excess = len(self._cache) - self._max_cached
        if excess > 0:
            candidates = (p for sid, p in self._cache.items() if self._evictable(sid))
            evicted = list(islice(candidates, excess))
            for victim in evicted:
                del self._cache[victim.session_id]
                self._saving[victim.session_id] = victim
            try:
                await self._checkpoint(evicted)
            finally:
                for victim in evicted:
                    # Unless a read took it back (and so into the cache) meanwhile.
                    if self._saving.get(victim.session_id) is victim:
                        del self._saving[victim.session_id]

    def _evictable(self, session_id: str) -> bool:
        # A locked session may be mid-fold or about to register a watcher.
        return not self._watchers.get(session_id) and not self._locks.in_use(session_id)

    async def _checkpoint_if_due(self, projection: SessionProjection) -> None:
        due_after = max(self._checkpoint_every, projection.checkpoint_spacing)
        if projection.unsaved_events >= due_after:
            await self._checkpoint([projection])

    async def _checkpoint(
        self, projections: Iterable[SessionProjection], position: int | None = None
    ) -> None:
        due = [p for p in projections if p.unsaved_events and p.level]
        if not due and (position is None or position == self._saved_position):
            return
        # Taken before the save may suspend: what folds meanwhile stays unsaved.
        taken = [(p, p.unsaved_events, p.checkpoint()) for p in due]
        written = await self._store.save_sessions([c for _, _, c in taken], position)
        self.stats.checkpoints_written += written
        for projection, counted, checkpoint in taken:
            projection.unsaved_events = max(0, projection.unsaved_events - counted)
            projection.checkpoint_spacing = checkpoint.size // CHECKPOINT_BYTES_PER_EVENT
        if position is not None:
            self._saved_position = max(self._saved_position, position)

    # -- watchers ----------------------------------------------------------------------

    def _notify(self, projection: SessionProjection, since: int) -> None:
        """Offer the watchers what the events folded after `since` changed:
        the latest of each view, as a resumed watch's backlog gives it."""
        changes = projection.changes_after(since)
        if not changes:
            return
        session_id = projection.session_id
        self._notify_all(session_id, changes)
        watchers = self._watchers.get(session_id, set())
        for watcher in list(watchers):
            if not watcher.offer(changes):
                watcher.close(WatchLagged(session_id))
                watchers.discard(watcher)

    def _notify_all(self, session_id: str, changes: list[Change]) -> None:
        for queue in list(self._all_watchers):
            if queue.qsize() + len(changes) > self._watch_buffer:
                self._all_watchers.discard(queue)
                queue.put_nowait(_Closed(WatchLagged("*")))
                continue
            for change in changes:
                queue.put_nowait(SessionChange(session_id, change))

    def _discard(self, session_id: str, error: DomainError) -> None:
        self._cache.pop(session_id, None)
        self._saving.pop(session_id, None)
        for watcher in self._watchers.pop(session_id, set()):
            watcher.close(error)

    def _forget_watcher(self, session_id: str, watcher: _Watcher) -> None:
        watchers = self._watchers.get(session_id)
        if watchers is not None:
            watchers.discard(watcher)
            if not watchers:
                del self._watchers[session_id]

    def _close_all_watchers(self, error: DomainError) -> None:
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.close(error)
        self._watchers.clear()
        for queue in self._all_watchers:
            queue.put_nowait(_Closed(error))
        self._all_watchers.clear()


def _shutting_down() -> Unavailable:
    return Unavailable("SHUTTING_DOWN", "projection engine stopped")


def _session_of(event: port.Event) -> str:
    return event.session_id


async def _close_stream(stream: AsyncIterator[BatchItem]) -> None:
    # The port promises an AsyncIterator; the implementations are generators
    # whose pending waits should end now rather than at garbage collection.
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


def _waiting(
    first: SessionChange | _Closed, queue: asyncio.Queue[SessionChange | _Closed]
) -> tuple[list[SessionChange], _Closed | None]:
    """`first` and the changes queued behind it, up to the end of the queue
    or the close that ends it."""
    changes: list[SessionChange] = []
    item = first
    while not isinstance(item, _Closed):
        changes.append(item)
        if queue.empty():
            return changes, None
        item = queue.get_nowait()
    return changes, item
