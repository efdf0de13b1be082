"""Fixtures shared by the suites: real stores, real servers on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agenthost.sessionlog.v1 import session_log_pb2_grpc

from services.agentruntime.models.tests.fake_provider import FakeProvider, serving
from services.sessionlog.service import session_log_service
from tests.support.hosts import running_host


@pytest.fixture(params=["grpc", "local"])
async def session_log_channel(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[grpc.aio.Channel]:
    """A channel to a session-log service: over loopback gRPC, and the
    in-process one its peers in the embedded stack use (the same answers)."""
    definition = session_log_service(tmp_path / "sessionlog.db")
    async with running_host("sessionlog", definition, tmp_path, local=request.param == "local") as (
        _,
        channel,
    ):
        yield channel


@pytest.fixture
async def session_log_grpc_channel(tmp_path: Path) -> AsyncIterator[grpc.aio.Channel]:
    """Only over gRPC: what the port serves besides the service (reflection)."""
    definition = session_log_service(tmp_path / "sessionlog.db")
    async with running_host("sessionlog", definition, tmp_path) as (_, channel):
        yield channel


@pytest.fixture
def session_log_stub(
    session_log_channel: grpc.aio.Channel,
) -> session_log_pb2_grpc.SessionLogServiceStub:
    return session_log_pb2_grpc.SessionLogServiceStub(session_log_channel)


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    """An OpenAI-compatible model provider on loopback (the one fake allowed)."""
    async with serving() as server:
        yield server
