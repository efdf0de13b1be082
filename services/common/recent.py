"""A bounded map that forgets the least recently used entries first.

The gateway's caches (fences, ownership, owners) and the session log's
headers hold one entry per client or session ever seen; each is a cache
whose forgotten entry is simply looked up (or admitted) again, so a bound
costs a lookup, never correctness.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Recent(OrderedDict[K, V]):
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def remember(self, key: K, value: V) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)

    def recall(self, key: K) -> V | None:
        """The value (now the most recently used), or None."""
        if key not in self:
            return None
        self.move_to_end(key)
        return self[key]
