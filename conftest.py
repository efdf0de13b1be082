"""Fixtures for every suite (tests/ and the unit tests next to each service)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agenthost_core.locations import ENV_CONFIG_DIR
from services.projection.checkpoint_store import CheckpointStore
from services.sessionlog.domain import SessionLog, open_session_log
from services.workspace.store import WorkspaceStore
from tests.support import hangs
from tests.support.folders import Folders
from tests.support.stores import (
    STORE_BACKENDS,
    StoreBackend,
    checkpoint_store_backend,
    workspace_store_backend,
)


@pytest.fixture(autouse=True, scope="session")
def empty_config_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """No test reads the developer's own agenthost config folder (global
    instructions, skills, settings): the run has an empty one of its own,
    and a test that needs files there names a folder of its own."""
    folder = tmp_path_factory.mktemp("config")
    before = os.environ.get(ENV_CONFIG_DIR)
    os.environ[ENV_CONFIG_DIR] = str(folder)
    yield folder
    if before is None:
        os.environ.pop(ENV_CONFIG_DIR, None)
    else:
        os.environ[ENV_CONFIG_DIR] = before


@pytest.fixture
async def session_log(tmp_path: Path) -> AsyncIterator[SessionLog]:
    """The real in-process session log on a SQLite file."""
    async with open_session_log(tmp_path / "sessionlog.db") as log:
        yield log


@pytest.fixture
def folders(tmp_path: Path) -> Folders:
    """Project folders under tmp_path, made on first mention."""
    return Folders(tmp_path / "folders")


@pytest.fixture(params=STORE_BACKENDS)
async def workspace_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreBackend[WorkspaceStore]]:
    """The workspace store on each backend (a SQLite file, a PostgreSQL
    schema of its own); each `opened()` after the first is a restart."""
    async with workspace_store_backend(request.param, tmp_path).cleaned() as chosen:
        yield chosen


@pytest.fixture
async def workspace_store(
    workspace_backend: StoreBackend[WorkspaceStore],
) -> AsyncIterator[WorkspaceStore]:
    async with workspace_backend.opened() as store:
        yield store


@pytest.fixture(params=STORE_BACKENDS)
async def checkpoint_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreBackend[CheckpointStore]]:
    """The projection checkpoint store on each backend, as workspace_backend."""
    async with checkpoint_store_backend(request.param, tmp_path).cleaned() as chosen:
        yield chosen


# A hung async test prints its asyncio tasks' stacks before pytest-timeout
# stops it (tests/support/hangs.py); returning None lets pytest-timeout's own
# timer be set and cancelled as usual.
def pytest_timeout_set_timer(item: pytest.Item, settings: object) -> None:
    hangs.set_timer(item, settings)


def pytest_timeout_cancel_timer(item: pytest.Item) -> None:
    hangs.cancel_timer(item)
