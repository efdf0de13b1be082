"""The runtime's capabilities (capability.py), each a module of its own."""

from __future__ import annotations

from typing import Any

from services.projection.unit import ProjectionUnit

from ..capability import Capability
from .instructions import CONTEXT_UNIT, Instructions
from .references import FileReferences
from .todos import TODOS_UNIT, Todos


def default_capabilities() -> list[Capability]:
    """What every session of a runtime gets, in the order they are asked."""
    return [Instructions(), FileReferences(), Todos()]


def projection_units() -> tuple[ProjectionUnit[Any], ...]:
    """The views of the capabilities' state clients see, folded from the
    whole log by the projection service."""
    return (CONTEXT_UNIT, TODOS_UNIT)
