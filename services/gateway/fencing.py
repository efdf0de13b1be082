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

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from services.common.errors import DomainError, FailedPrecondition

from .fence_store import FenceStore, MemoryFenceStore, Order


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


class Fences:
    """The rules; what they remember is in the store (in memory for one
    gateway, shared by replicas: fence_store.py)."""

    def __init__(self, store: FenceStore | None = None) -> None:
        self.store: FenceStore = store if store is not None else MemoryFenceStore()

    async def connect(self, account: str, client_id: str, generation: int) -> None:
        """A (re)connection: its generation supersedes every older one."""
        await self._check_generation(account, client_id, generation)

    async def check_read(self, fence: Fence | None) -> None:
        if fence is not None:
            await self._check_generation(fence.account, fence.client_id, fence.generation)

    @asynccontextmanager
    async def mutation(self, fence: Fence, session_id: str) -> AsyncIterator[None]:
        """Admit a mutating request for the block, or raise Stale before it.
        The block applies the request: a DomainError out of it means nothing
        was applied, so the request id stays free for a retry."""
        await self._check_generation(fence.account, fence.client_id, fence.generation)
        key = (fence.account, fence.client_id, session_id)
        newest = await self.store.reserve(key, fence.order)
        if newest is not None:
            raise Stale(
                f"request {fence.request_id} of generation {fence.generation} is not "
                f"newer than request {newest[1]} of generation {newest[0]} already applied "
                f"(or in progress) on session {session_id!r}",
                session_id=session_id,
                applied_generation=newest[0],
                applied_request_id=newest[1],
            )
        applied = True
        try:
            yield
        except DomainError:
            applied = False
            raise
        finally:
            await self.store.release(key, fence.order, applied=applied)

    async def _check_generation(self, account: str, client_id: str, generation: int) -> None:
        current = await self.store.advance_generation((account, client_id), generation)
        if generation < current:
            raise Stale(
                f"generation {generation} of client {client_id!r} was superseded by {current}",
                client_id=client_id,
                current_generation=current,
            )
