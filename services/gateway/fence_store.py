"""Where the gateway keeps its fences: per client the newest generation, per
(client, session) the newest mutation applied and those in flight.

One gateway keeps them in memory (`MemoryFenceStore`, the embedded default).
Gateways run as replicas share them in PostgreSQL (`PostgresFenceStore`):
a client whose connection moves to another gateway takes a new generation
there, and the gateway it left must refuse the old one too, which only a
shared table can tell it. Each operation is one atomic step against the
store, so two gateways admitting requests of one client race safely; the
rules (what is stale, what frees a request id) stay in `fencing.Fences`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from services.common.recent import Recent

Order = tuple[int, int]  # (generation, request id)
# (account, client id)
ClientKey = tuple[str, str]
# (account, client id, session id)
RequestKey = tuple[str, str, str]

# Clients and (client, session) pairs a memory store remembers; the least
# recently used are forgotten first (a forgotten client's next request is
# simply admitted).
MAX_REMEMBERED = 100_000


class FenceStore(Protocol):
    async def advance_generation(self, client: ClientKey, generation: int) -> int:
        """Record `generation` unless a newer one is known; the client's
        generation after this (the given one, or the newer)."""
        ...

    async def reserve(self, key: RequestKey, order: Order) -> Order | None:
        """Take `order` as in flight unless a mutation at least as new is
        applied or in flight; None when taken, else that newest order."""
        ...

    async def release(self, key: RequestKey, order: Order, *, applied: bool) -> None:
        """`order` ended: applied (it is the newest applied when newer), or
        not (refused with a typed error: its id is free again)."""
        ...

    async def open(self) -> None: ...

    async def close(self) -> None: ...


@dataclass
class _Requests:
    applied: Order | None = None
    in_flight: list[Order] = field(default_factory=list)

    def newest(self) -> Order | None:
        return max([*self.in_flight, *([self.applied] if self.applied else [])], default=None)


class MemoryFenceStore:
    def __init__(self, limit: int = MAX_REMEMBERED) -> None:
        self._generations: Recent[ClientKey, int] = Recent(limit)
        self._requests: Recent[RequestKey, _Requests] = Recent(limit)

    async def advance_generation(self, client: ClientKey, generation: int) -> int:
        current = max(self._generations.get(client, -1), generation)
        self._generations.remember(client, current)
        return current

    async def reserve(self, key: RequestKey, order: Order) -> Order | None:
        requests = self._requests.recall(key) or _Requests()
        newest = requests.newest()
        if newest is not None and order <= newest:
            return newest
        requests.in_flight.append(order)
        self._requests.remember(key, requests)
        return None

    async def release(self, key: RequestKey, order: Order, *, applied: bool) -> None:
        # Forgotten meanwhile (the table is bounded): keep what is learnt.
        requests = self._requests.recall(key) or _Requests()
        if order in requests.in_flight:
            requests.in_flight.remove(order)
        if applied and (requests.applied is None or order > requests.applied):
            requests.applied = order
        if applied or requests.in_flight:
            self._requests.remember(key, requests)

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass
