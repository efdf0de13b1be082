"""One asyncio lock per key, created on first use and dropped when unused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class _Entry:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class KeyedLock:
    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        entry = self._entries.setdefault(key, _Entry())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[key]

    def in_use(self, key: str) -> bool:
        """Someone holds or waits for the key's lock."""
        return key in self._entries
