"""What every call is scoped to: the caller's account (from its bearer
token), the sessions that account owns, and its client's fences (requests
of a superseded connection, or older than one applied, are STALE)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal, Protocol

from agenthost.gateway.v1 import gateway_pb2 as gw

from .access import SessionAccess
from .accounts import current_account
from .fencing import Fence, Fences


class FencedRequest(Protocol):
    @property
    def fence(self) -> gw.RequestFence: ...

    def HasField(self, field_name: Literal["fence"]) -> bool: ...


def fence_of(message: gw.RequestFence) -> Fence:
    """The request's fence, scoped by the caller's account."""
    return Fence(current_account.get(), message.client_id, message.generation, message.request_id)


@dataclass(frozen=True)
class CallScope:
    access: SessionAccess
    fences: Fences

    @property
    def account(self) -> str:
        return current_account.get()

    async def own(self, session_id: str) -> str:
        """The caller's account, after checking it owns the session."""
        account = current_account.get()
        await self.access.check(account, session_id)
        return account

    async def read(self, request: FencedRequest) -> None:
        """A read is refused only when its connection was superseded."""
        if request.HasField("fence"):
            await self.fences.check_read(fence_of(request.fence))

    @asynccontextmanager
    async def mutating(self, fence: gw.RequestFence, session_id: str) -> AsyncIterator[str]:
        """Account scope first (no existence leak), then the fences; the block
        applies the request (its id stays free when it raises a domain error)."""
        account = await self.own(session_id)
        async with self.fences.mutation(fence_of(fence), session_id):
            yield account
