"""Projection views of one session, where the higher seq wins.

Seeded from the projection block of an opened tail page (all keys as of the
page's seq) and moved forward by `session_projection` frames `{key, value,
seq}`. A value older than the one held is dropped; on an equal seq a frame
wins over the block (frames are in stream order and a selection waiting for
a boundary changes a view without a new log seq).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import struct_pb2

JsonValue = Any


def from_value(value: struct_pb2.Value) -> JsonValue:
    """A protobuf Value as plain Python (dict, list, str, float, bool, None)."""
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return {key: from_value(item) for key, item in value.struct_value.fields.items()}
    if kind == "list_value":
        return [from_value(item) for item in value.list_value.values]
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        return value.number_value
    if kind == "bool_value":
        return value.bool_value
    return None


@dataclass(frozen=True)
class ProjectionEntry:
    """A value and the log seq it is current as of."""

    value: JsonValue
    seq: int


class ProjectionStore:
    """One session's projection values; the higher seq wins."""

    def __init__(self) -> None:
        self._entries: dict[str, ProjectionEntry] = {}

    def get(self, key: str) -> JsonValue:
        """The value of `key` (None when unknown)."""
        entry = self._entries.get(key)
        return None if entry is None else entry.value

    def entry(self, key: str) -> ProjectionEntry | None:
        """The value of `key` with its seq."""
        return self._entries.get(key)

    def values(self) -> dict[str, JsonValue]:
        """Every value, by key."""
        return {key: entry.value for key, entry in self._entries.items()}

    def seed(self, block: Mapping[str, struct_pb2.Value], seq: int) -> list[str]:
        """A projection block as of `seq`; keys held at a newer or equal seq
        stay. Returns the keys that changed."""
        changed: list[str] = []
        for key, value in block.items():
            held = self._entries.get(key)
            if held is None or seq > held.seq:
                changed += self._put(key, from_value(value), seq)
        return changed

    def update(self, key: str, value: struct_pb2.Value, seq: int) -> bool:
        """A pushed change; dropped when older than the value held."""
        held = self._entries.get(key)
        if held is not None and seq < held.seq:
            return False
        return bool(self._put(key, from_value(value), seq))

    def clear(self) -> None:
        """Forget every value (the history was replaced)."""
        self._entries.clear()

    def _put(self, key: str, value: JsonValue, seq: int) -> list[str]:
        held = self._entries.get(key)
        self._entries[key] = ProjectionEntry(value, seq)
        return [] if held is not None and held.value == value else [key]
