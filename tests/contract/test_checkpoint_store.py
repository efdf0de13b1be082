"""The projection checkpoint store on every backend (SQLite file, PostgreSQL
schema): what one engine saves, the next one (a restart) loads."""

from __future__ import annotations

import asyncio
import sqlite3

import psycopg
import pytest

from services.projection.checkpoint_store import (
    CheckpointStore,
    SessionCheckpoint,
    UnitCheckpoint,
)
from tests.support.stores import StoreBackend


def checkpoint(session_id: str, watermark: int, **units: UnitCheckpoint) -> SessionCheckpoint:
    return SessionCheckpoint(session_id, watermark, units)


async def test_checkpoints_survive_a_restart(
    checkpoint_backend: StoreBackend[CheckpointStore],
) -> None:
    saved = checkpoint(
        "s1", 41, messages=UnitCheckpoint(1, b"7", 40), title=UnitCheckpoint(3, b"", -1)
    )
    async with checkpoint_backend.opened() as store:
        assert await store.save_sessions([saved], position=99) == 1

    async with checkpoint_backend.opened() as store:
        assert await store.load_session("s1") == saved
        assert await store.load_session("s2") is None
        assert await store.load_position() == 99


async def test_a_new_checkpoint_replaces_every_unit_of_the_session(
    checkpoint_backend: StoreBackend[CheckpointStore],
) -> None:
    async with checkpoint_backend.opened() as store:
        await store.save_sessions(
            [checkpoint("s1", 3, a=UnitCheckpoint(1, b"a", 2), b=UnitCheckpoint(1, b"b", 3))]
        )
        await store.save_sessions([checkpoint("s1", 9, a=UnitCheckpoint(1, b"A", 9))])

        # "b" is no longer folded: its old row must not claim watermark 9.
        assert await store.load_session("s1") == checkpoint("s1", 9, a=UnitCheckpoint(1, b"A", 9))


async def test_sessions_are_saved_together_and_kept_apart(
    checkpoint_backend: StoreBackend[CheckpointStore],
) -> None:
    one = checkpoint("s1", 5, a=UnitCheckpoint(1, b"one", 5))
    two = checkpoint("s2", 8, a=UnitCheckpoint(2, b"two", 7), b=UnitCheckpoint(1, b"\x00", 8))
    async with checkpoint_backend.opened() as store:
        assert await store.save_sessions([one, two]) == 2
        await store.save_sessions([checkpoint("s1", 6)])

        assert await store.load_session("s1") == checkpoint("s1", 6)
        assert await store.load_session("s2") == two


async def test_the_position_starts_at_zero_and_never_moves_back(
    checkpoint_backend: StoreBackend[CheckpointStore],
) -> None:
    async with checkpoint_backend.opened() as store:
        assert await store.load_position() == 0
        await store.save_position(10)
        await store.save_position(4)
        await store.save_sessions([], position=7)

        assert await store.load_position() == 10


async def test_a_failed_save_leaves_the_previous_checkpoint_whole(
    checkpoint_backend: StoreBackend[CheckpointStore],
) -> None:
    before = checkpoint("s1", 3, a=UnitCheckpoint(1, b"a", 3))
    async with checkpoint_backend.opened() as store:
        await store.save_sessions([before], position=3)
        # A unit state that is no bytes cannot be stored: the whole save fails.
        broken = checkpoint("s2", 9, a=UnitCheckpoint(1, None, 9))  # type: ignore[arg-type]
        with pytest.raises((sqlite3.IntegrityError, psycopg.errors.NotNullViolation)):
            await store.save_sessions([checkpoint("s1", 9), broken], position=9)

        assert await store.load_session("s1") == before
        assert await store.load_session("s2") is None
        assert await store.load_position() == 3


async def test_replicas_checkpointing_one_session_at_once_never_mix_units(
    checkpoint_backend: StoreBackend[CheckpointStore],
) -> None:
    one = checkpoint("s1", 5, a=UnitCheckpoint(1, b"a5", 5), b=UnitCheckpoint(1, b"b5", 4))
    two = checkpoint("s1", 7, a=UnitCheckpoint(1, b"a7", 7))
    async with checkpoint_backend.opened() as first, checkpoint_backend.opened() as second:
        for _ in range(10):
            await asyncio.gather(first.save_sessions([one]), second.save_sessions([two]))

            assert await first.load_session("s1") in (one, two)
