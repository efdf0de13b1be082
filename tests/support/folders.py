"""Real folders for workspace paths: a workspace only takes an existing
directory, so tests name their project folders and get real ones."""

from __future__ import annotations

import os
from pathlib import Path


class Folders:
    """`folders("/src/app")` makes `<root>/src/app` (once) and returns its
    canonical path, the spelling a workspace reports."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, name: str) -> str:
        folder = self.root / name.lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        return os.path.realpath(folder)
