"""Fixtures: the real in-process session log on a SQLite file under
tmp_path, the workspace store on each backend (a SQLite file, a PostgreSQL
schema of its own), and a clock the test moves by hand."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agenthost.sessionlog.v1 import events_pb2

from services.sessionlog.domain import SessionLog, open_session_log
from services.workspace.domain import Workspaces
from services.workspace.store import WorkspaceStore

START_US = 1_700_000_000_000_000


class ManualClock:
    """Epoch microseconds that only move when the test says so."""

    def __init__(self, now_us: int = START_US) -> None:
        self.now_us = now_us

    def __call__(self) -> int:
        return self.now_us

    def advance(self, seconds: float = 1.0) -> None:
        self.now_us += int(seconds * 1_000_000)


def prompt_events(text: str = "hello") -> list[events_pb2.Event]:
    """What the runtime appends when it accepts a user's first prompt."""
    return [
        events_pb2.Event(turn_start=events_pb2.TurnStart(turn_id="t-1")),
        events_pb2.Event(
            user_message=events_pb2.UserMessage(
                text=text,
                source=events_pb2.MessageSource(kind=events_pb2.SOURCE_KIND_USER),
            )
        ),
    ]


def plan_mode_event(active: bool = True) -> events_pb2.Event:
    return events_pb2.Event(plan_mode=events_pb2.PlanMode(active=active))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "log.db"


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "workspaces.db"


@pytest.fixture
async def log(log_path: Path) -> AsyncIterator[SessionLog]:
    async with open_session_log(log_path) as opened:
        yield opened


@pytest.fixture
def store(workspace_store: WorkspaceStore) -> WorkspaceStore:
    """On each backend (the root conftest's workspace_store)."""
    return workspace_store


@pytest.fixture
def workspaces(log: SessionLog, store: WorkspaceStore, clock: ManualClock) -> Workspaces:
    return Workspaces(log, store, clock)
