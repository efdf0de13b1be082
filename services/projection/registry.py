"""The set of projection units a deployment folds, by key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import InvalidUnitKey, UnitKeyConflict
from .unit import ProjectionUnit

MAX_KEY_LENGTH = 64  # GetProjectionRequest.keys allows up to 64 characters


@dataclass(frozen=True)
class UnitInfo:
    key: str
    state_version: int


class UnitRegistry:
    """Units in registration order (the order of their frames for one event).

    Registering is idempotent for the same unit (the same object, or another
    instance of the same class with the same state_version: plugin wiring may
    build a unit twice). A different class or state_version under a taken key
    is a `UnitKeyConflict`: both would share, and corrupt, one checkpoint.
    """

    def __init__(self, units: tuple[ProjectionUnit[Any], ...] = ()) -> None:
        self._units: dict[str, ProjectionUnit[Any]] = {}
        for unit in units:
            self.register(unit)

    def register(self, unit: ProjectionUnit[Any]) -> None:
        key = unit.key
        if not key or len(key) > MAX_KEY_LENGTH:
            raise InvalidUnitKey(key)
        existing = self._units.get(key)
        if existing is None:
            self._units[key] = unit
        elif not _same_unit(existing, unit):
            raise UnitKeyConflict(key, existing.state_version, unit.state_version)

    def get(self, key: str) -> ProjectionUnit[Any] | None:
        return self._units.get(key)

    def units(self) -> tuple[ProjectionUnit[Any], ...]:
        return tuple(self._units.values())

    def describe(self) -> list[UnitInfo]:
        return [UnitInfo(u.key, u.state_version) for u in self._units.values()]

    def __contains__(self, key: object) -> bool:
        return key in self._units

    def __len__(self) -> int:
        return len(self._units)


def _same_unit(a: ProjectionUnit[Any], b: ProjectionUnit[Any]) -> bool:
    return a is b or (type(a) is type(b) and a.state_version == b.state_version)
