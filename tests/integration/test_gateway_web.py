"""The gateway as a browser reaches it: gRPC-Web and the Connect protocol on
its web port, spoken on the wire by a plain HTTP client (tests/support/web.py),
against the whole stack on loopback. The same calls from connect-web's own
transports run in test_web_transport.py."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw

from services.agentruntime.models.builtin import BuiltinAdapter
from services.common.config import LOOPBACK
from services.common.web import EXPOSED_HEADERS
from services.embedded import EmbeddedStack
from services.gateway.accounts import TokenStore
from tests.support.gateway import ALICE
from tests.support.web import Browser, WebStatus

WAIT_S = 10.0
PROJECT = tempfile.gettempdir()
ALLOWED = "http://app.example.test:5173"
DISALLOWED = "http://elsewhere.example.test"


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[EmbeddedStack]:
    stack = EmbeddedStack(
        tmp_path,
        port_override=0,
        model=BuiltinAdapter(),
        tokens=TokenStore({ALICE: "alice"}),
        web_origins=(LOOPBACK, ALLOWED),
    )
    await stack.start()
    try:
        yield stack
    finally:
        await stack.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=WAIT_S) as client:
        yield client


def browser(
    http: httpx.AsyncClient, stack: EmbeddedStack, token: str | None = ALICE, origin: str = ALLOWED
) -> Browser:
    assert stack.web_url is not None
    return Browser(http, stack.web_url, token, origin)


def fence(client_id: str = "web-1", generation: int = 0, request_id: int = 1) -> gw.RequestFence:
    return gw.RequestFence(client_id=client_id, generation=generation, request_id=request_id)


async def test_a_unary_call_with_the_bearer_token(
    stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    page = browser(http, stack)
    created, status, response = await page.grpc_web(
        "CreateSession",
        gw.CreateSessionRequest(cwd=PROJECT, fence=fence()),
        gw.CreateSessionResponse,
    )
    assert status == WebStatus("ok")
    assert created is not None and created.session.id
    # What a page at an allowed origin may read of the answer.
    assert response.headers["access-control-allow-origin"] == ALLOWED
    exposed = response.headers["access-control-expose-headers"].lower().split(", ")
    assert {"grpc-status", "grpc-message", "grpc-status-details-bin"} <= set(exposed)

    listed, status, _ = await page.connect_unary(
        "ListSessions", gw.ListSessionsRequest(), gw.ListSessionsResponse
    )
    assert status == WebStatus("ok")
    assert listed is not None
    assert [s.id for s in listed.sessions] == [created.session.id]


async def test_a_load_balancer_asks_health_over_http_and_sees_a_draining_gateway(
    tmp_path: Path, http: httpx.AsyncClient
) -> None:
    """What haproxy's check does (deploy/docker/haproxy.cfg): health's Check
    as a Connect JSON POST, with no token; a stopping gateway answers
    NOT_SERVING for its drain, while it still takes calls."""
    stack = EmbeddedStack(
        tmp_path, port_override=0, model=BuiltinAdapter(), tokens=TokenStore({}), drain_s=2.0
    )
    await stack.start()
    try:
        assert stack.web_url is not None
        check = f"{stack.web_url}/grpc.health.v1.Health/Check"
        headers = {"content-type": "application/json"}
        answer = await http.post(check, content=b"{}", headers=headers)
        assert (answer.status_code, answer.json()) == (200, {"status": "SERVING"})
        stopping = asyncio.create_task(stack.stop_service("gateway"))
        async with asyncio.timeout(WAIT_S):
            while answer.json() == {"status": "SERVING"}:
                answer = await http.post(check, content=b"{}", headers=headers)
        assert (answer.status_code, answer.json()) == (200, {"status": "NOT_SERVING"})
        assert not stopping.done()  # draining: the balancer looks elsewhere first
        await stopping
    finally:
        await stack.stop()


async def test_a_call_without_a_token_is_unauthenticated(
    stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    for token in (None, "not-a-token"):
        page = browser(http, stack, token=token)
        _, status, _ = await page.grpc_web(
            "ListSessions", gw.ListSessionsRequest(), gw.ListSessionsResponse
        )
        assert (status.code, status.reason()) == ("unauthenticated", "UNAUTHENTICATED")
        _, status, response = await page.connect_unary(
            "ListSessions", gw.ListSessionsRequest(), gw.ListSessionsResponse
        )
        assert response.status_code == 401
        assert (status.code, status.reason()) == ("unauthenticated", "UNAUTHENTICATED")


async def test_a_preflight_from_an_allowed_origin_succeeds_and_from_another_does_not(
    stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    assert stack.web_url is not None
    url = f"{stack.web_url}/agenthost.gateway.v1.GatewayService/ListSessions"
    asks = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type,x-grpc-web,x-user-agent",
    }
    own = stack.web_url.replace("127.0.0.1", "localhost")  # the web client's, by default
    for origin in (ALLOWED, own):
        allowed = await http.options(url, headers={"origin": origin, **asks})
        assert allowed.status_code == 200, allowed.text
        assert allowed.headers["access-control-allow-origin"] == origin
        assert "POST" in allowed.headers["access-control-allow-methods"]
        granted = allowed.headers["access-control-allow-headers"].lower()
        assert all(h in granted for h in ("authorization", "content-type", "x-grpc-web"))

    refused = await http.options(url, headers={"origin": DISALLOWED, **asks})
    assert refused.status_code == 400
    assert "access-control-allow-origin" not in refused.headers
    # An actual request from there is answered, but without the headers a
    # browser needs to let the page read it.
    _, _, response = await browser(http, stack, origin=DISALLOWED).grpc_web(
        "ListSessions", gw.ListSessionsRequest(), gw.ListSessionsResponse
    )
    assert "access-control-allow-origin" not in response.headers
    assert all(h in EXPOSED_HEADERS for h in ("grpc-status", "grpc-status-details-bin"))


async def test_a_validation_error_arrives_with_its_violations_and_reason(
    stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    page = browser(http, stack)
    request = gw.CreateSessionRequest(cwd="relative/path", fence=fence())
    for call in (page.grpc_web, page.connect_unary):
        _, status, _ = await call("CreateSession", request, gw.CreateSessionResponse)
        assert status.code == "invalid_argument"
        assert status.reason() == "INVALID_REQUEST"
        assert [field for field, _ in status.violations()] == ["cwd"]
        assert "absolute path" in status.violations()[0][1]


async def test_the_connect_stream_delivers_session_events_as_they_happen(
    stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    page = browser(http, stack)
    frames = page.connect_stream(
        "Connect", gw.ConnectRequest(client_id="web-1", generation=0), gw.ConnectResponse
    )
    async with asyncio.timeout(WAIT_S):
        first = await anext(frames)
        assert isinstance(first, gw.ConnectResponse) and first.HasField("connected")
        created, status, _ = await page.connect_unary(
            "CreateSession",
            gw.CreateSessionRequest(cwd=PROJECT, fence=fence(request_id=1)),
            gw.CreateSessionResponse,
        )
        assert status == WebStatus("ok") and created is not None
        session_id = created.session.id
        _, status, _ = await page.connect_unary(
            "Prompt",
            gw.PromptRequest(session_id=session_id, text="hello", fence=fence(request_id=2)),
            gw.PromptResponse,
        )
        assert status == WebStatus("ok")
        # The model's answer arrives on the open stream: frames are written
        # as they come, the stream itself never ends while the page is there.
        async for frame in frames:
            assert isinstance(frame, gw.ConnectResponse), f"the stream ended: {frame}"
            event = frame.session_event
            if event.session_id == session_id and event.event.HasField("assistant_message"):
                break
    await frames.aclose()


async def test_a_stale_generation_gets_the_stale_reason(
    stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    page = browser(http, stack)
    created, _, _ = await page.connect_unary(
        "CreateSession",
        gw.CreateSessionRequest(cwd=PROJECT, fence=fence()),
        gw.CreateSessionResponse,
    )
    assert created is not None
    # The page reconnected with generation 1; a request of generation 0 is stale.
    frames = page.connect_stream(
        "Connect", gw.ConnectRequest(client_id="web-1", generation=1), gw.ConnectResponse
    )
    async with asyncio.timeout(WAIT_S):
        first = await anext(frames)
        assert isinstance(first, gw.ConnectResponse) and first.HasField("connected")
        stale = gw.SetPlanModeRequest(
            session_id=created.session.id, active=True, fence=fence(generation=0, request_id=9)
        )
        for call in (page.grpc_web, page.connect_unary):
            _, status, _ = await call("SetPlanMode", stale, gw.SetPlanModeResponse)
            assert (status.code, status.reason()) == ("failed_precondition", "STALE")
    await frames.aclose()


async def test_a_stream_refused_before_its_first_frame_carries_its_status(
    stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    page = browser(http, stack, token=None)
    frames = page.connect_stream(
        "Connect", gw.ConnectRequest(client_id="web-1", generation=0), gw.ConnectResponse
    )
    async with asyncio.timeout(WAIT_S):
        ended = [frame async for frame in frames]
    assert len(ended) == 1 and isinstance(ended[0], WebStatus)
    assert (ended[0].code, ended[0].reason()) == ("unauthenticated", "UNAUTHENTICATED")
