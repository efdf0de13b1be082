"""Pending selections are durable and per session."""

from __future__ import annotations

from pathlib import Path

from services.planmode.pending_store import PendingSelection, open_pending_store


async def test_a_selection_survives_reopening_the_store(tmp_path: Path) -> None:
    path = tmp_path / "pending.db"
    async with open_pending_store(path) as store:
        await store.put("s1", PendingSelection(active=True, queued_at_seq=4))
    async with open_pending_store(path) as reopened:
        assert await reopened.get("s1") == PendingSelection(active=True, queued_at_seq=4)


async def test_a_newer_selection_replaces_the_older_one(tmp_path: Path) -> None:
    async with open_pending_store(tmp_path / "pending.db") as store:
        await store.put("s1", PendingSelection(active=True, queued_at_seq=4))
        await store.put("s1", PendingSelection(active=False, queued_at_seq=9))
        assert await store.get("s1") == PendingSelection(active=False, queued_at_seq=9)


async def test_sessions_do_not_share_selections(tmp_path: Path) -> None:
    async with open_pending_store(tmp_path / "pending.db") as store:
        await store.put("s1", PendingSelection(active=True, queued_at_seq=0))
        assert await store.get("s2") is None
        await store.discard("s1")
        assert await store.get("s1") is None
        await store.discard("s1")  # discarding nothing is fine
