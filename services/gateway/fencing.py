"""Fencing stale requests with monotonic request generations.

A client's generation grows on every reconnect; requests carry (client,
generation, request id). A request from a superseded generation is STALE, and
so is a mutating request no newer than one already applied (or in flight)
for the same session by the same client (request ids only order one
client's requests).

A client is (account, client id): client ids are chosen by clients, so
another account using the same one only ever fences itself.

A request id is used up only by a request that was applied. A request the
services refuse with a typed error (AGENT_BUSY, NOT_FOUND, ...) applied
nothing and may be retried with the same id. One whose outcome is unknown
(cancelled, a peer lost mid-call) keeps its id used: it may have been
applied, and a retry must not apply it twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from services.common.errors import DomainError, FailedPrecondition
from services.common.recent import Recent

# Clients and (client, session) pairs remembered; the least recently used are
# forgotten first (a forgotten client's next request is simply admitted).
MAX_REMEMBERED = 100_000

Order = tuple[int, int]  # (generation, request id)


class Stale(FailedPrecondition):
    REASON = "STALE"

    def __init__(self, why: str, **metadata: str | int) -> None:
        super().__init__(self.REASON, why, **metadata)


@dataclass(frozen=True)
class Fence:
    account: str
    client_id: str
    generation: int
    request_id: int

    @property
    def order(self) -> Order:
        return (self.generation, self.request_id)


@dataclass
class _Requests:
    """One client's mutations of one session: the newest applied, and those
    admitted whose outcome is not known yet."""

    applied: Order | None = None
    in_flight: list[Order] = field(default_factory=list)

    def newest(self) -> Order | None:
        return max([*self.in_flight, *([self.applied] if self.applied else [])], default=None)


class Fences:
    def __init__(self, limit: int = MAX_REMEMBERED) -> None:
        self._generations: Recent[tuple[str, str], int] = Recent(limit)
        self._requests: Recent[tuple[str, str, str], _Requests] = Recent(limit)

    def connect(self, account: str, client_id: str, generation: int) -> None:
        """A (re)connection: its generation supersedes every older one."""
        self._check_generation(account, client_id, generation)

    def check_read(self, fence: Fence | None) -> None:
        if fence is not None:
            self._check_generation(fence.account, fence.client_id, fence.generation)

    @contextmanager
    def mutation(self, fence: Fence, session_id: str) -> Iterator[None]:
        """Admit a mutating request for the block, or raise Stale before it.
        The block applies the request: a DomainError out of it means nothing
        was applied, so the request id stays free for a retry."""
        self._check_generation(fence.account, fence.client_id, fence.generation)
        key = (fence.account, fence.client_id, session_id)
        requests = self._requests.recall(key) or _Requests()
        newest = requests.newest()
        if newest is not None and fence.order <= newest:
            raise Stale(
                f"request {fence.request_id} of generation {fence.generation} is not "
                f"newer than request {newest[1]} of generation {newest[0]} already applied "
                f"(or in progress) on session {session_id!r}",
                session_id=session_id,
                applied_generation=newest[0],
                applied_request_id=newest[1],
            )
        requests.in_flight.append(fence.order)
        self._requests.remember(key, requests)
        applied = True
        try:
            yield
        except DomainError:
            applied = False
            raise
        finally:
            requests.in_flight.remove(fence.order)
            if applied and (requests.applied is None or fence.order > requests.applied):
                requests.applied = fence.order
            # Forgotten meanwhile (the table is bounded): keep what we learnt.
            if applied and key not in self._requests:
                self._requests.remember(key, requests)

    def _check_generation(self, account: str, client_id: str, generation: int) -> None:
        key = (account, client_id)
        current = self._generations.get(key, -1)
        if generation < current:
            raise Stale(
                f"generation {generation} of client {client_id!r} was superseded by {current}",
                client_id=client_id,
                current_generation=current,
            )
        self._generations.remember(key, generation)
