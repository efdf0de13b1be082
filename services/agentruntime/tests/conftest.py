"""Fixtures shared by the runtime's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.sessionlog.domain import SessionLog


@pytest.fixture
async def session(session_log: SessionLog, tmp_path: Path) -> str:
    """A session in the log, for an agent to run turns on."""
    await session_log.create_session("s", str(tmp_path))
    return "s"
