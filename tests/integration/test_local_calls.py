"""The in-process calls between the embedded stack's services
(services/common/local.py) behave as calls over loopback gRPC where a peer
would notice: a peer that is down, restarting or stopping, deadlines, and
streams nobody reads any more. (Answers and errors of a running service are
the same over both: tests/integration/test_session_log_service.py runs on
each.)"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from agenthost.sessionlog.v1 import session_log_pb2 as pb
from agenthost.sessionlog.v1 import session_log_pb2_grpc as pb_grpc

from services.common.config import ServiceConfig
from services.common.deadlines import downstream_timeout
from services.common.errors import PeerUnavailable
from services.common.local import LocalChannel, LocalEndpoints
from services.common.server import ServiceHost
from services.sessionlog.client import SessionLogClient
from services.sessionlog.port import CaughtUp
from services.sessionlog.service import session_log_service
from tests.support.events import Event, user
from tests.support.rpc import expect_rpc_error

Stub = pb_grpc.SessionLogServiceStub


@asynccontextmanager
async def session_log(endpoints: LocalEndpoints, data_dir: Path) -> AsyncIterator[ServiceHost]:
    """A session-log host reachable through `endpoints`, stopped at the end."""
    config = ServiceConfig(name="sessionlog", data_dir=data_dir, grace_s=1.0)
    host = ServiceHost(config, session_log_service(data_dir / "log.db"), local=endpoints)
    await host.start()
    try:
        yield host
    finally:
        await host.stop()


@pytest.fixture
def endpoints() -> LocalEndpoints:
    return LocalEndpoints()


@pytest.fixture
def stub(endpoints: LocalEndpoints) -> Stub:
    return Stub(LocalChannel(endpoints, "sessionlog"))


async def test_a_peer_that_is_down_is_unavailable_or_waited_for(
    endpoints: LocalEndpoints, stub: Stub, tmp_path: Path
) -> None:
    async with session_log(endpoints, tmp_path):
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s", cwd="/a"))
        await stub.Append(pb.AppendRequest(session_id="s", events=[user("kept")]))
    request = pb.GetSessionRequest(session_id="s")
    await expect_rpc_error(stub.GetSession(request), grpc.StatusCode.UNAVAILABLE)
    await expect_rpc_error(
        stub.GetSession(request, wait_for_ready=True, timeout=0.2),
        grpc.StatusCode.DEADLINE_EXCEEDED,
    )
    # A client waits for the restart (and is refused, then retries, while
    # the restarted log opens its storage: as over gRPC).
    client = SessionLogClient(LocalChannel(endpoints, "sessionlog"))
    waiting = asyncio.ensure_future(client.get_session("s"))
    async with session_log(endpoints, tmp_path):
        assert (await waiting).id == "s"


async def test_a_stopping_service_ends_its_streams_unavailable_after_what_it_sent(
    endpoints: LocalEndpoints, tmp_path: Path
) -> None:
    client = SessionLogClient(LocalChannel(endpoints, "sessionlog"))
    async with session_log(endpoints, tmp_path) as host:
        await client.create_session("s", "/a")
        await client.append("s", [user("one")])
        items = client.subscribe("s", after_seq=-1)
        first = await anext(items)
        assert isinstance(first, Event) and first.user_message.text == "one"
        assert isinstance(await anext(items), CaughtUp)
        stopping = asyncio.ensure_future(host.stop())
        with pytest.raises(PeerUnavailable):
            await anext(items)
        await stopping


async def test_a_stream_ends_at_its_deadline(
    endpoints: LocalEndpoints, stub: Stub, tmp_path: Path
) -> None:
    async with session_log(endpoints, tmp_path):
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s", cwd="/a"))
        call = stub.Subscribe(pb.SubscribeRequest(session_id="s", after_seq=-1), timeout=0.3)
        assert (await call.read()).HasField("caught_up")
        await expect_rpc_error(call.read(), grpc.StatusCode.DEADLINE_EXCEEDED)


async def test_a_stream_its_reader_dropped_is_no_longer_served(
    endpoints: LocalEndpoints, stub: Stub, tmp_path: Path
) -> None:
    async with session_log(endpoints, tmp_path):
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s", cwd="/a"))
        call = stub.Subscribe(pb.SubscribeRequest(session_id="s", after_seq=-1))
        assert (await call.read()).HasField("caught_up")
        endpoint = await endpoints.find("sessionlog", wait=False, deadline=None)
        del call
        gc.collect()
        await asyncio.wait_for(endpoint.streams_ended(), 5)


async def test_a_peer_call_leaves_the_callers_deadline_alone(
    endpoints: LocalEndpoints, stub: Stub, tmp_path: Path
) -> None:
    """The peer's guard records its own caller's deadline: it must not
    become the deadline of the service that called it."""
    async with session_log(endpoints, tmp_path):
        assert downstream_timeout(None) is None
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s", cwd="/a"), timeout=5)
        assert downstream_timeout(None) is None
