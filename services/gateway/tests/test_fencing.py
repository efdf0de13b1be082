"""One gateway's fences in memory are bounded: the least recently used
clients are forgotten (and simply admitted again), the recent ones fenced.
The rules themselves are tests/contract/test_fences.py, on every store."""

from __future__ import annotations

import pytest

from services.gateway.fence_store import MemoryFenceStore
from services.gateway.fencing import Fence, Fences, Stale


async def test_the_tables_are_bounded() -> None:
    store = MemoryFenceStore(limit=3)
    fences = Fences(store)
    for n in range(10):
        await fences.connect("alice", f"client-{n}", 1)
        async with fences.mutation(Fence("alice", f"client-{n}", 1, 1), f"s-{n}"):
            pass
    assert len(store._generations) == 3 and len(store._requests) == 3
    await fences.connect("alice", "client-0", 0)
    with pytest.raises(Stale):
        await fences.connect("alice", "client-9", 0)
