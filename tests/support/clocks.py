"""A hand-moved clock, and a session-log service that reads it.

Sharing one clock between the session log (session `updated_at`) and another
service (say workspace `created_at`) makes cross-service timestamps, and
ties between them, exact in tests that run the services over gRPC.
"""

from __future__ import annotations

from pathlib import Path

from services.common.server import ServiceDefinition
from services.sessionlog.service import session_log_service

START_US = 1_700_000_000_000_000


class ManualClock:
    """Epoch microseconds that only move when the test says so."""

    def __init__(self, now_us: int = START_US) -> None:
        self.now_us = now_us

    def __call__(self) -> int:
        return self.now_us

    def advance(self, seconds: float = 1.0) -> None:
        self.now_us += int(seconds * 1_000_000)


def timed_session_log_service(db_path: Path, clock: ManualClock) -> ServiceDefinition:
    """session_log_service(db_path), with the domain on `clock`."""
    return session_log_service(db_path, clock=clock)
