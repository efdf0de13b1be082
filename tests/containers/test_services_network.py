"""Every service of deploy/services.toml in its own container on one
user-defined network: each becomes SERVING (gRPC health, watched from the
host through its published port) and reaches the services it needs by name;
then the gateway scenarios run through them, with the session-log container
restarted mid-test and no event lost on the client's stream."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack

import grpc
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from testcontainers.core.network import Network

from clients.sdk.auth import authorized_channel
from tests.containers.stack import PORT, ServiceContainer, registry, wait_serving
from tests.support.gateway import Client

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]


async def test_each_service_in_its_own_container_serves_the_gateway_scenarios(
    agenthost_image: str, network: Network, test_session: str
) -> None:
    with ExitStack() as stack:
        containers: dict[str, ServiceContainer] = {}
        # In registry order, each once the ones it needs are serving (as compose does).
        for name, entry in registry().items():
            assert set(entry.get("needs", [])) <= set(containers), name
            container = ServiceContainer(agenthost_image, name, network, test_session)
            containers[name] = stack.enter_context(container)
            try:
                await wait_serving(container.address)
            except TimeoutError:
                pytest.fail(f"{name} never became SERVING:\n{container.logs()[-4000:]}")

        # Docker's DNS on the network: each service reaches the ones it needs
        # by name, checked with the image's probe (compose's health check).
        for name, entry in registry().items():
            for peer in entry.get("needs", []):
                probe = ["grpc-health-probe", "--address", f"{peer}:{PORT}"]
                result = containers[name].exec(probe)
                output = result.output.decode(errors="replace")
                assert result.exit_code == 0, f"{name} -> {peer}: {output}"
                assert "SERVING" in output

        token = containers["gateway"].exec(["cat", "/data/token"]).output.decode().strip()
        await gateway_scenarios(containers["gateway"].address, token, containers["sessionlog"])


async def gateway_scenarios(address: str, token: str, sessionlog: ServiceContainer) -> None:
    channel = authorized_channel(address, token)
    client = Client(gw_grpc.GatewayServiceStub(channel), channel, "containers")
    try:
        # The cwd must be a folder the workspace container has (/tmp: every one).
        created = await client.stub.CreateSession(
            gw.CreateSessionRequest(cwd="/tmp", fence=client.fence()), wait_for_ready=True
        )
        session_id = created.session.id
        await client.connect(cursors={session_id: -1})

        committed = await client.stub.SetPlanMode(
            gw.SetPlanModeRequest(session_id=session_id, active=True, fence=client.fence())
        )
        assert committed.outcome == pm.SET_OUTCOME_COMMITTED
        await client.next_frame(
            lambda f: f.HasField("session_event") and f.session_event.event.HasField("plan_mode")
        )
        await prompt_and_wait(client, session_id, "before the restart")

        await asyncio.to_thread(sessionlog.get_wrapped_container().restart)
        await wait_serving(sessionlog.address)
        await prompt_and_wait(client, session_id, "after the restart")

        opened = await client.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id))
        assert opened.projections["plan"].struct_value["active"] is True
        await client.next_frame(
            lambda f: f.HasField("session_event") and f.session_event.seq == opened.seq,
            seen_or_next=True,
        )
        seqs = [f.session_event.seq for f in client.received if f.HasField("session_event")]
        assert seqs == list(range(opened.seq + 1)), "an event was lost or repeated"
        replies = [
            e.assistant_message.text for e in opened.events if e.HasField("assistant_message")
        ]
        assert replies == ["Echo: before the restart", "Echo: after the restart"]
    finally:
        await client.disconnect()
        await channel.close()


async def prompt_and_wait(client: Client, session_id: str, text: str) -> None:
    """Send a prompt (retrying while the restarted session log comes back)
    and wait on the stream until the turn is over."""
    async with asyncio.timeout(60):
        while True:
            try:
                await client.stub.Prompt(
                    gw.PromptRequest(session_id=session_id, text=text, fence=client.fence()),
                    wait_for_ready=True,
                )
                break
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
    await client.next_frame(lambda f: f.HasField("session_status") and not f.session_status.running)
