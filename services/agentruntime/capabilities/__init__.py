"""The runtime's capabilities (capability.py), each a module of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.projection.unit import ProjectionUnit

from ..capability import Capability
from .checkpoints import Checkpoints
from .checkpoints.history import CHECKPOINTS_UNIT
from .instructions import CONTEXT_UNIT, Instructions
from .jobs import JOBS_UNIT, Jobs

# Where the checkpoints' shadow repositories live in the stack's data folder.
CHECKPOINTS_FOLDER = "checkpoints"
# Where the sessions with jobs running are noted (jobs/live.py's Markers).
JOBS_FOLDER = "jobs"


def default_capabilities(data_dir: Path | None = None) -> list[Capability]:
    """What every session of a runtime gets, in the order they are asked.
    Without a data folder there is nowhere to keep checkpoints, nor to note
    the sessions with jobs running (a load still settles their jobs)."""
    found: list[Capability] = [Instructions()]
    if data_dir is not None:
        found.append(Checkpoints(data_dir / CHECKPOINTS_FOLDER))
    found.append(Jobs(data_dir / JOBS_FOLDER if data_dir is not None else None))
    return found


def projection_units() -> tuple[ProjectionUnit[Any], ...]:
    """The views of the capabilities' state clients see, folded from the
    whole log by the projection service."""
    return (CONTEXT_UNIT, CHECKPOINTS_UNIT, JOBS_UNIT)
