"""Lazy sessions: created, never appended to, so not durable and never listed.

They sit behind one small interface (store.py's PendingSessions) with two
implementations: a dict in the process (below), for a store only this
process writes (SQLite), and a table every replica sees, for a shared store
(PostgreSQL: postgres_store.py). The first append that stores a session ends
its pending life; the domain (domain.py) decides everything else, so the two
differ only in where the headers are kept.
"""

from __future__ import annotations

from .store import PENDING_TTL_US, SessionHeader


class MemoryPendingSessions:
    """In this process's memory: gone after a restart."""

    def __init__(self) -> None:
        # Insertion order is creation order, so the expired ones come first.
        self._headers: dict[str, SessionHeader] = {}

    async def add(self, header: SessionHeader) -> SessionHeader:
        self._sweep(header.created_at_us - PENDING_TTL_US)
        return self._headers.setdefault(header.id, header)

    async def get(self, session_id: str) -> SessionHeader | None:
        return self._headers.get(session_id)

    async def discard(self, session_id: str) -> bool:
        return self._headers.pop(session_id, None) is not None

    async def made_durable(self, session_id: str) -> None:
        self._headers.pop(session_id, None)

    def _sweep(self, before_us: int) -> None:
        while self._headers:
            oldest = next(iter(self._headers.values()))
            if oldest.created_at_us >= before_us:
                return
            del self._headers[oldest.id]
