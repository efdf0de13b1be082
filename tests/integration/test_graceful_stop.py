"""A graceful stop (SIGTERM) of a service process: it ends its streams so its
clients move on, lets the calls it already received finish, and exits
without waiting out its grace period."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agenthost.sessionlog.v1 import session_log_pb2 as pb
from agenthost.sessionlog.v1 import session_log_pb2_grpc as pb_grpc
from grpc_health.v1 import health_pb2

from services.common.client import open_channel
from services.common.server import GRACE_OVER
from services.sessionlog.client import SessionLogClient
from tests.support.events import user
from tests.support.hosts import ServiceProcess, wait_for_health

SERVING = health_pb2.HealthCheckResponse.SERVING
WAIT_S = 30.0
TRANSPORT_CODES = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
}
# Far longer than any wait here: a stop that waited out its grace would fail the test.
GRACE_S = "600"


@pytest.fixture
async def session_log(tmp_path: Path) -> AsyncIterator[ServiceProcess]:
    process = ServiceProcess(
        "services.sessionlog", tmp_path / "data", env={"AGENTHOST_GRACE_S": GRACE_S}
    )
    yield process
    process.kill()


async def test_sigterm_ends_the_subscriptions_and_exits_without_waiting_out_the_grace(
    session_log: ServiceProcess,
) -> None:
    async with open_channel(await session_log.start()) as channel:
        await wait_for_health(channel, SERVING)
        log = SessionLogClient(channel)
        await log.create_session("s", "/w")
        await log.append("s", [user("hello")])
        stub = pb_grpc.SessionLogServiceStub(channel)
        one = stub.Subscribe(pb.SubscribeRequest(session_id="s", after_seq=-1))
        every = stub.SubscribeAll(pb.SubscribeAllRequest(after_position=0))
        for stream in (one, every):  # both live: caught up with the log
            async with asyncio.timeout(WAIT_S):
                while (await stream.read()).WhichOneof("message") != "caught_up":
                    pass

        session_log.signal(signal.SIGTERM)
        for stream in (one, every):
            async with asyncio.timeout(WAIT_S):
                while await stream.read() is not grpc.aio.EOF:
                    pass
            assert await stream.code() == grpc.StatusCode.OK  # ended, not cancelled
        assert await session_log.wait(within_s=WAIT_S) == 0


async def test_calls_received_before_sigterm_finish_and_nothing_acknowledged_is_lost(
    session_log: ServiceProcess,
) -> None:
    address = await session_log.start()
    async with open_channel(address) as channel:
        await wait_for_health(channel, SERVING)
        log = SessionLogClient(channel)
        await log.create_session("s", "/w")
        await log.append("s", [user("first")])
        stub = pb_grpc.SessionLogServiceStub(channel)
        # A subscriber keeps the server busy, as the gateway's and projection's do.
        follower = stub.SubscribeAll(pb.SubscribeAllRequest(after_position=0))
        appends = [
            stub.Append(pb.AppendRequest(session_id="s", events=[user(f"m{n}", event_id=f"m{n}")]))
            for n in range(100)
        ]
        first = asyncio.ensure_future(appends[0])
        await asyncio.wait_for(asyncio.shield(first), WAIT_S)  # the calls are under way
        session_log.signal(signal.SIGTERM)
        outcomes = await asyncio.gather(*appends[1:], return_exceptions=True)
        follower.cancel()
    codes = {
        grpc.StatusCode.OK if isinstance(o, pb.AppendResponse) else o.code()
        for o in outcomes
        if isinstance(o, (pb.AppendResponse, grpc.aio.AioRpcError))
    }
    assert len(outcomes) == 99 and codes <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}
    acknowledged = {f"m{n + 1}" for n, o in enumerate(outcomes) if isinstance(o, pb.AppendResponse)}
    assert await session_log.wait(within_s=WAIT_S) == 0

    async with open_channel(await session_log.start()) as channel:
        await wait_for_health(channel, SERVING)
        stored = {e.id for e in (await SessionLogClient(channel).read("s", limit=1000)).events}
    assert acknowledged | {"m0"} <= stored


async def test_callers_retrying_throughout_the_stop_do_not_hold_it_or_get_cut_off(
    session_log: ServiceProcess,
) -> None:
    """Clients that keep calling while the service stops (each retrying a
    refusal at once, as a reconnecting client does) never leave it a quiet
    spell: the stop must not wait for one (the grace here is far longer than
    the test's wait), and no call it took is cut off by the end of its grace.

    gRPC itself still cancels the calls that reach the server as it shuts
    down, before any handler sees them: the SDK reports those as the gateway
    going away (UNAVAILABLE, CUT_OFF)."""
    address = await session_log.start()
    async with open_channel(address) as channel:
        await wait_for_health(channel, SERVING)
        await SessionLogClient(channel).create_session("s", "/w")
        stub = pb_grpc.SessionLogServiceStub(channel)
        codes: list[grpc.StatusCode] = []
        under_way = asyncio.Event()

        async def keep_calling() -> None:
            while True:
                try:
                    # gRPC can hold a call that raced its shutdown until the
                    # call's deadline: a short one keeps that from the wait.
                    await stub.GetSession(pb.GetSessionRequest(session_id="s"), timeout=2)
                    codes.append(grpc.StatusCode.OK)
                except grpc.aio.AioRpcError as error:
                    codes.append(error.code())
                if len(codes) >= 20:
                    under_way.set()

        callers = [asyncio.create_task(keep_calling()) for _ in range(4)]
        try:
            await asyncio.wait_for(under_way.wait(), WAIT_S)
            session_log.signal(signal.SIGTERM)
            exit_code = await session_log.wait(within_s=WAIT_S)
        finally:
            for caller in callers:
                caller.cancel()
            await asyncio.gather(*callers, return_exceptions=True)
    assert exit_code == 0
    assert not [line for line in session_log.lines if GRACE_OVER in line]
    assert set(codes) <= TRANSPORT_CODES | {grpc.StatusCode.OK}, set(codes)
