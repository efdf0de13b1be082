"""Fixtures for every suite (tests/ and the unit tests next to each service)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.sessionlog.domain import SessionLog, open_session_log
from tests.support.folders import Folders


@pytest.fixture
async def session_log(tmp_path: Path) -> AsyncIterator[SessionLog]:
    """The real in-process session log on a SQLite file."""
    async with open_session_log(tmp_path / "sessionlog.db") as log:
        yield log


@pytest.fixture
def folders(tmp_path: Path) -> Folders:
    """Project folders under tmp_path, made on first mention."""
    return Folders(tmp_path / "folders")
