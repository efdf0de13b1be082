"""Every contract test of the session log runs once on each backend; a new
backend only adds an entry to tests/support/stores.BACKENDS."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.sessionlog.domain import SessionLog
from tests.support.stores import BACKENDS, OpenLog


@pytest.fixture(params=sorted(BACKENDS))
async def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OpenLog]:
    """Opens the log on the backend; calling it again simulates a restart."""
    open_log = OpenLog(BACKENDS[request.param](tmp_path))
    await open_log.clean()
    yield open_log
    await open_log.close()
    await open_log.clean()


@pytest.fixture
async def log(reopen: OpenLog) -> SessionLog:
    return await reopen()
