"""Fencing stale requests with monotonic request generations.

A client's generation grows on every reconnect; requests carry (client,
generation, request id). A request from a superseded generation is STALE, and
so is a mutating request no newer than one already applied for the same
session by the same client (request ids only order one client's requests).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TypeVar

from services.common.errors import FailedPrecondition

K = TypeVar("K")
V = TypeVar("V")


class Stale(FailedPrecondition):
    REASON = "STALE"

    def __init__(self, why: str, **metadata: str | int) -> None:
        super().__init__(self.REASON, why, **metadata)


@dataclass(frozen=True, order=True)
class Fence:
    generation: int
    request_id: int
    client_id: str = ""


# Clients and (session, client) pairs remembered; the least recently used are
# forgotten first (a forgotten client's next request is simply admitted).
MAX_REMEMBERED = 100_000


class _Recent(OrderedDict[K, V]):
    def remember(self, key: K, value: V) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > MAX_REMEMBERED:
            self.popitem(last=False)


class Fences:
    def __init__(self) -> None:
        self._generations: _Recent[str, int] = _Recent()
        self._applied: _Recent[tuple[str, str], tuple[int, int]] = _Recent()

    def connect(self, client_id: str, generation: int) -> None:
        """A (re)connection: its generation supersedes every older one."""
        self._check_generation(client_id, generation)
        self._generations.remember(client_id, generation)

    def check_read(self, fence: Fence | None) -> None:
        if fence is not None:
            self._check_generation(fence.client_id, fence.generation)

    def admit_mutation(self, fence: Fence, session_id: str) -> None:
        """Admit and record a mutating request, or raise Stale without applying."""
        self._check_generation(fence.client_id, fence.generation)
        key = (session_id, fence.client_id)
        order = (fence.generation, fence.request_id)
        last = self._applied.get(key)
        if last is not None and order <= last:
            raise Stale(
                f"request {fence.request_id} of generation {fence.generation} is not "
                f"newer than request {last[1]} of generation {last[0]} already applied "
                f"to session {session_id!r}",
                session_id=session_id,
                applied_generation=last[0],
                applied_request_id=last[1],
            )
        self._applied.remember(key, order)

    def _check_generation(self, client_id: str, generation: int) -> None:
        current = self._generations.get(client_id, -1)
        if generation < current:
            raise Stale(
                f"generation {generation} of client {client_id!r} was superseded by {current}",
                client_id=client_id,
                current_generation=current,
            )
        self._generations.remember(client_id, generation)
