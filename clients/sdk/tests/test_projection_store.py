"""The projection store: the higher seq wins, seeded from a page's block."""

from __future__ import annotations

from typing import Any

from google.protobuf import struct_pb2

from clients.sdk.projection import ProjectionStore, from_value


def struct(**fields: Any) -> struct_pb2.Value:
    value = struct_pb2.Value()
    value.struct_value.update(fields)
    return value


def test_values_convert_to_plain_python() -> None:
    value = struct(active=True, pending=False, items=[1, "a", None], nested={"k": 2.5})
    assert from_value(value) == {
        "active": True,
        "pending": False,
        "items": [1.0, "a", None],
        "nested": {"k": 2.5},
    }


def test_a_block_seeds_and_newer_frames_move_it_forward() -> None:
    store = ProjectionStore()
    assert store.seed({"plan": struct(active=False, pending=False)}, 4) == ["plan"]
    assert store.update("plan", struct(active=True, pending=False), 6)
    assert store.get("plan") == {"active": True, "pending": False}
    entry = store.entry("plan")
    assert entry is not None and entry.seq == 6


def test_an_older_frame_or_block_is_dropped() -> None:
    store = ProjectionStore()
    store.update("plan", struct(active=True, pending=False), 6)
    assert not store.update("plan", struct(active=False, pending=False), 5)
    assert store.seed({"plan": struct(active=False, pending=False)}, 6) == []
    assert store.seed({"plan": struct(active=False, pending=False)}, 3) == []
    assert store.get("plan") == {"active": True, "pending": False}


def test_on_an_equal_seq_a_frame_wins_over_the_block() -> None:
    # A selection waiting for a boundary changes the view without a new seq.
    store = ProjectionStore()
    store.seed({"plan": struct(active=False, pending=False)}, 4)
    assert store.update("plan", struct(active=False, pending=True), 4)
    assert store.update("plan", struct(active=False, pending=False), 4)
    assert store.get("plan") == {"active": False, "pending": False}


def test_keys_are_independent() -> None:
    store = ProjectionStore()
    store.seed({"plan": struct(active=False), "title": struct(text="t")}, 2)
    store.update("plan", struct(active=True), 9)
    assert store.seed({"title": struct(text="u")}, 3) == ["title"]
    assert store.values() == {"plan": {"active": True}, "title": {"text": "u"}}
