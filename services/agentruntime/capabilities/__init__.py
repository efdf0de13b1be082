"""The runtime's capabilities (capability.py), each a module of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.projection.unit import ProjectionUnit
from services.sessionlog.port import SessionLogPort

from ..capability import Capability
from .checkpoints import Checkpoints
from .checkpoints.history import CHECKPOINTS_UNIT
from .commands import Commands
from .hooks import Hooks
from .images import Images, ModelImages
from .instructions import CONTEXT_UNIT, Instructions
from .jobs import JOBS_UNIT, Jobs
from .references import FileReferences
from .skills import Skills
from .subagents import Children, Subagents
from .subagents.children import SUBAGENTS_UNIT
from .todos import TODOS_UNIT, Todos

# Where the checkpoints' shadow repositories live in the stack's data folder.
CHECKPOINTS_FOLDER = "checkpoints"
# Where the sessions with jobs running are noted (jobs/live.py's Markers).
JOBS_FOLDER = "jobs"


def default_capabilities(
    config_dir: Path,
    data_dir: Path | None = None,
    children: Children | None = None,
    images: tuple[SessionLogPort, ModelImages] | None = None,
) -> list[Capability]:
    """What every session of a runtime gets, in the order they are asked.
    Without a data folder there is nowhere to keep checkpoints, nor to note
    the sessions with jobs running (a load still settles their jobs); without
    the runtime to run them, no subagents; without the log (where a
    prompt's images are kept) and the models, no images."""
    found: list[Capability] = [
        Instructions(),
        Skills(),
        Commands(),
        FileReferences(),
        Todos(),
        Hooks(),
    ]
    if images is not None:
        # After the hooks: a prompt they refuse keeps no image.
        found.append(Images(*images))
    if data_dir is not None:
        found.append(Checkpoints(data_dir / CHECKPOINTS_FOLDER))
    found.append(Jobs(data_dir / JOBS_FOLDER if data_dir is not None else None))
    if children is not None:
        found.append(Subagents(children, config_dir))
    return found


def projection_units() -> tuple[ProjectionUnit[Any], ...]:
    """The views of the capabilities' state clients see, folded from the
    whole log by the projection service."""
    return (CONTEXT_UNIT, CHECKPOINTS_UNIT, TODOS_UNIT, SUBAGENTS_UNIT, JOBS_UNIT)
