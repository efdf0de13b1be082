from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.planmode.controller import PlanModeController
from services.planmode.tests.harness import RuntimeDriver
from services.sessionlog.domain import SessionLog, open_session_log


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[SessionLog]:
    async with open_session_log(tmp_path / "log.db") as session_log:
        yield session_log


@pytest.fixture
def controller(log: SessionLog) -> PlanModeController:
    return PlanModeController(log)


@pytest.fixture
async def session_id(log: SessionLog) -> str:
    summary, _ = await log.create_session(None, "/home/dev/project")
    return summary.id


@pytest.fixture
def runtime(log: SessionLog, controller: PlanModeController, session_id: str) -> RuntimeDriver:
    return RuntimeDriver(log, controller, session_id)
