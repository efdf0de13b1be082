"""Fixtures shared by the runtime's tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.agentruntime.tests.jail import Machine
from services.sessionlog.domain import SessionLog


@pytest.fixture
async def session(session_log: SessionLog, tmp_path: Path) -> str:
    """A session in the log, for an agent to run turns on."""
    await session_log.create_session("s", str(tmp_path))
    return "s"


@pytest.fixture
def machine() -> Iterator[Machine]:
    """Folders for an escape test (jail.py), removed after it."""
    base = Path(tempfile.mkdtemp(prefix="agenthost-jail-", dir="/var/tmp"))
    try:
        yield Machine(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
