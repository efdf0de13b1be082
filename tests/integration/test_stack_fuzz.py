"""Every method of the services the session-log and workspace fuzz does not
cover (plan mode, projection, the agent runtime and the gateway), fuzzed from
their descriptors against the whole embedded stack: random valid-shaped
requests and random bytes get OK or a typed refusal, never INTERNAL or
UNKNOWN, and every service keeps answering health. The gateway is fuzzed with
an account's token and without one (then every call is UNAUTHENTICATED,
whatever its bytes), the internal services with the stack's internal token.
Rows are not compared here: these services keep none of their own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agenthost.gateway.v1 import gateway_pb2
from agenthost.planmode.v1 import plan_mode_pb2
from agenthost.projection.v1 import projection_pb2
from agenthost.runtime.v1 import runtime_pb2
from google.protobuf.descriptor import ServiceDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clients.sdk import AgentHostClient
from clients.sdk.auth import authorized_channel
from tests.support.folders import Folders
from tests.support.fuzz import Pool, ServiceFuzzer, fuzzable
from tests.support.gateway import ALICE, GatewayHarness, running_gateway

INTERNAL = {
    "planmode": plan_mode_pb2.DESCRIPTOR.services_by_name["PlanModeService"],
    "projection": projection_pb2.DESCRIPTOR.services_by_name["ProjectionService"],
    "agentruntime": runtime_pb2.DESCRIPTOR.services_by_name["AgentRuntimeService"],
}
GATEWAY = gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"]

FUZZ = settings(
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
async def stack(tmp_path: Path, folders: Folders) -> AsyncIterator[tuple[GatewayHarness, Pool]]:
    async with running_gateway(tmp_path / "data") as harness:
        async with AgentHostClient(harness.address, ALICE) as client:
            summary = await client.create_session(cwd=folders("/src/app"))
            workspace = await client.create_workspace(folders("/src/other"))
        pool = Pool(
            {
                "session_id": [summary.id, "s-unknown"],
                "workspace_id": [workspace.id],
                "path": [folders("/src/app"), "/"],
                "cwd": [folders("/src/app")],
            }
        )
        yield harness, pool


def methods(services: dict[str, ServiceDescriptor]) -> list[tuple[str, str]]:
    return [(name, method) for name, service in services.items() for method in fuzzable(service)]


def wire(fuzzer: ServiceFuzzer, method: str, data: st.DataObject) -> bytes:
    """A valid-shaped request or random bytes."""
    if data.draw(st.booleans()):
        return data.draw(st.binary(max_size=256))
    return fuzzer.draw_request(data, fuzzer.method(method)).SerializeToString()


@pytest.mark.parametrize(("service", "method"), methods(INTERNAL))
@FUZZ
@given(data=st.data())
async def test_an_internal_service_answers_any_request_typed(
    stack: tuple[GatewayHarness, Pool], service: str, method: str, data: st.DataObject
) -> None:
    harness, pool = stack
    async with harness.stack.channel(service) as channel:
        fuzzer = ServiceFuzzer(INTERNAL[service], channel, pool)
        await fuzzer.check(fuzzer.method(method), wire(fuzzer, method, data))


@pytest.mark.parametrize("method", fuzzable(GATEWAY))
@FUZZ
@given(data=st.data())
async def test_the_gateway_answers_any_request_typed(
    stack: tuple[GatewayHarness, Pool], method: str, data: st.DataObject
) -> None:
    harness, pool = stack
    async with authorized_channel(harness.address, ALICE) as channel:
        fuzzer = ServiceFuzzer(GATEWAY, channel, pool)
        await fuzzer.check(fuzzer.method(method), wire(fuzzer, method, data))


@pytest.mark.parametrize("method", fuzzable(GATEWAY))
@settings(FUZZ, max_examples=10)
@given(data=st.data())
async def test_the_gateway_refuses_any_request_without_a_token(
    stack: tuple[GatewayHarness, Pool], method: str, data: st.DataObject
) -> None:
    harness, pool = stack
    async with authorized_channel(harness.address, None) as channel:
        fuzzer = ServiceFuzzer(GATEWAY, channel, pool)
        outcome = await fuzzer.call(fuzzer.method(method), wire(fuzzer, method, data))
        assert outcome.code == grpc.StatusCode.UNAUTHENTICATED, outcome.describe()
        await fuzzer.assert_healthy()
