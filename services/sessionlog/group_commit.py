"""Group commit: concurrent appends share one transaction and one fsync.

Why. An acknowledged append is on disk, so each commit waits for the disk
(SQLite WAL with synchronous=FULL, PostgreSQL's WAL flush), and appends are
serialised anyway: SQLite has one writer, and PostgreSQL appends hold one
advisory lock (postgres_store.py). N concurrent appenders therefore waited for
N commits one after the other, and on PostgreSQL for several round trips each
under the lock. Appends that arrive while a commit runs have to wait for it
either way; committing them together costs the wait once.

How. Writes queue here and one drain task at a time serves the queue in
arrival order. The appends waiting when the previous commit ends form the next
wave (never more than MAX_GROUP_EVENTS events, so one transaction stays short;
a larger batch is a wave alone). Nothing waits to fill a wave: a lone append
commits at once, so grouping adds no latency; it only appears under load.
A backend commits a wave as one transaction (read what the store holds, plan
with append_plan.py, write, commit) and answers every caller only after that
commit returned: the durability promise is unchanged.

Per caller, a wave is indistinguishable from one transaction per batch:
- the plan decides each batch in arrival order against the store as the
  earlier batches left it, so seqs stay gapless, expected-seq checks and
  idempotent retries answer as before, and a refused batch writes nothing;
- positions are assigned as the wave's rows are inserted, in that same
  order, and waves (and forks) are serialised, so positions follow commit
  order;
- an error no plan foresees (the database refusing a row, a lost connection)
  fails the wave's transaction, which writes nothing; then each batch is
  committed alone, so only the batch at fault fails. Retrying is safe even
  when a failed commit's outcome is unknown: appends are idempotent by event
  id, so a batch that did commit answers its original seqs.

Fork and delete go through the same queue, each as its own transaction, so
they stay ordered with the appends around them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from services.common.tasks import spawn

from .append_plan import AppendRequest, Outcome
from .port import AppendResult

T = TypeVar("T")

# Events one wave writes at most: enough to absorb hundreds of concurrent
# single-event appends, few enough that a commit holds the write lock briefly.
MAX_GROUP_EVENTS = 1000

CommitWave = Callable[[Sequence[AppendRequest]], Awaitable[list[Outcome]]]


@dataclass
class CommitStats:
    """What the committer did since the store opened (for tests and measurements)."""

    transactions: int = 0
    appends: int = 0


@dataclass(eq=False)
class _Append:
    request: AppendRequest
    future: asyncio.Future[AppendResult]


@dataclass(eq=False)
class _Alone(Generic[T]):
    work: Callable[[], Awaitable[T]]
    future: asyncio.Future[T]


class GroupCommitter:
    """The write queue of one store; `commit_wave` commits a wave in one
    transaction and returns each request's outcome in order."""

    def __init__(self, commit_wave: CommitWave, max_events: int = MAX_GROUP_EVENTS) -> None:
        self._commit_wave = commit_wave
        self._max_events = max_events
        self._queue: deque[_Append | _Alone[Any]] = deque()
        self._drainer: asyncio.Task[None] | None = None
        self._closed = False
        self.stats = CommitStats()

    async def append(self, request: AppendRequest) -> AppendResult:
        future: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
        self._submit(_Append(request, future))
        return await future

    async def alone(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run `work` (one transaction of its own) in queue order."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._submit(_Alone(work, future))
        return await future

    async def close(self) -> None:
        """Refuse new writes and finish the queued ones."""
        self._closed = True
        if self._drainer is not None:
            await self._drainer

    def _submit(self, pending: _Append | _Alone[Any]) -> None:
        if self._closed:
            raise RuntimeError("session store is closed")
        self._queue.append(pending)
        if self._drainer is None:
            # spawn: no caller's context (deadline, account), and a drainer
            # that dies is logged.
            self._drainer = spawn(self._drain(), name="sessionlog-group-commit")

    async def _drain(self) -> None:
        taken: list[_Append | _Alone[Any]] = []
        try:
            while self._queue:
                head = self._queue.popleft()
                if isinstance(head, _Alone):
                    taken = [head]
                    await self._run_alone(head)
                else:
                    wave = self._wave_from(head)
                    taken = list(wave)
                    await self._run_wave(wave)
        except BaseException as error:
            # Whatever stopped the drainer, no caller is left waiting on it.
            failure = error if isinstance(error, Exception) else RuntimeError("write abandoned")
            for pending in [*taken, *self._queue]:
                _settle(pending.future, failure)
            self._queue.clear()
            raise
        finally:
            self._drainer = None

    def _wave_from(self, head: _Append) -> list[_Append]:
        """`head` and the appends queued right behind it, up to the event bound
        (callers that gave up before their wave began are left out)."""
        wave, events = [head], len(head.request.events)
        while self._queue:
            following = self._queue[0]
            if not isinstance(following, _Append):
                break
            if events + len(following.request.events) > self._max_events:
                break
            wave.append(following)
            self._queue.popleft()
            events += len(following.request.events)
        return [pending for pending in wave if not pending.future.cancelled()]

    async def _run_wave(self, wave: list[_Append]) -> None:
        if not wave:
            return
        requests = [pending.request for pending in wave]
        try:
            outcomes = await self._commit(requests)
        except Exception as error:
            outcomes = [error] if len(wave) == 1 else await self._one_by_one(requests)
        for pending, outcome in zip(wave, outcomes, strict=True):
            _settle(pending.future, outcome)
        self.stats.appends += len(wave)

    async def _one_by_one(self, requests: list[AppendRequest]) -> list[Outcome]:
        """The wave failed as a whole: each batch alone, so only its own fault fails it."""
        outcomes: list[Outcome] = []
        for request in requests:
            try:
                outcomes += await self._commit([request])
            except Exception as error:
                outcomes.append(error)
        return outcomes

    async def _commit(self, requests: list[AppendRequest]) -> list[Outcome]:
        self.stats.transactions += 1
        return await self._commit_wave(requests)

    async def _run_alone(self, pending: _Alone[Any]) -> None:
        if pending.future.cancelled():
            return
        self.stats.transactions += 1
        try:
            _settle(pending.future, await pending.work())
        except Exception as error:
            _settle(pending.future, error)


def _settle(future: asyncio.Future[Any], outcome: object) -> None:
    if future.done():  # the caller gave up while its write ran
        return
    if isinstance(outcome, Exception):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
