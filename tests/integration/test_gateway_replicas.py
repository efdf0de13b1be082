"""Gateways as stateless replicas over a stack on PostgreSQL: a client whose
connection moves from one gateway to another (here: a channel with both
addresses, as behind a load balancer, when the first one stops) resumes
with every event exactly once, and its superseded generation is refused by
both gateways, the restarted first one included, since the fences live in
the database rather than in either gateway. A plan choice made through one
gateway is seen through the other, pending included."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw

from clients.sdk import AgentHostClient
from tests.integration.test_gateway import (
    generating,
    is_idle,
    is_plan_event,
    is_plan_view,
    new_session,
    plan,
    plan_of,
    set_plan,
)
from tests.support.gateway import ALICE, Client, GatewayHarness, another_gateway, running_gateway
from tests.support.postgres import stack_on_postgres
from tests.support.rpc import expect_rpc_error, reason_of

pytestmark = pytest.mark.postgres

WAIT_S = 30.0


@pytest.fixture
async def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[GatewayHarness]:
    """The embedded stack with its database in a PostgreSQL schema of its own."""
    async with (
        stack_on_postgres(tmp_path, monkeypatch, "replicas"),
        running_gateway(tmp_path / "data") as harness,
    ):
        yield harness


async def refused_as_stale(client: Client, session_id: str, fence: gw.RequestFence) -> None:
    refused = await expect_rpc_error(
        client.stub.Prompt(
            gw.PromptRequest(session_id=session_id, text="from the past", fence=fence)
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert reason_of(refused) == "STALE"


async def test_a_client_moving_between_gateways_resumes_once_and_its_old_generation_is_stale(
    gateway: GatewayHarness, tmp_path: Path
) -> None:
    stack = gateway.stack
    first_address = gateway.address
    async with another_gateway(gateway) as second_address:
        both = f"ipv4:{first_address},{second_address}"  # pick_first: the first while it serves
        async with AgentHostClient(both, ALICE, client_id="mover") as client:
            session = await client.open_session((await client.create_session(cwd=str(tmp_path))).id)
            await session.prompt("before the move")
            await session.wait_until(lambda s: not s.running and s.last_seq > 0, WAIT_S)
            old_generation = client.generation

            await stack.stop_service("gateway")  # the client's gateway goes away
            await client.wait_for(
                lambda: client.connected and client.generation > old_generation, WAIT_S
            )
            await session.prompt("after the move")
            await session.wait_until(
                lambda s: (
                    not s.running
                    and any(
                        e.HasField("user_message") and e.user_message.text == "after the move"
                        for e in s.events
                    )
                ),
                WAIT_S,
            )
            seqs = session.history.seqs
            assert seqs == list(range(session.last_seq + 1)), seqs  # each event once, no gap

            old = gw.RequestFence(client_id="mover", generation=old_generation, request_id=10**6)
            await refused_as_stale(
                gateway.client_of(second_address, client_id="mover"), session.id, old
            )
            await stack.start_service("gateway")  # back, with nothing in memory
            await refused_as_stale(
                gateway.client_of(first_address, client_id="mover"), session.id, old
            )
            texts = [e.user_message.text for e in session.events if e.HasField("user_message")]
            assert texts == ["before the move", "after the move"]


async def test_a_plan_choice_through_one_gateway_is_seen_through_the_other_pending_included(
    gateway: GatewayHarness,
) -> None:
    """Chosen mid-turn through the second gateway, the choice is pending on
    the first too (live, and when read), and committed on both at the next
    model request."""
    async with another_gateway(gateway) as second_address:
        watcher = gateway.client(client_id="watcher")
        await watcher.connect()
        chooser = gateway.client_of(second_address, client_id="chooser")
        await chooser.connect()
        session_id = await new_session(watcher)
        held = await generating(gateway, watcher, session_id)

        chosen = await set_plan(chooser, session_id, True)
        assert chosen.plan == plan(False, pending=True)
        await watcher.next_frame(is_plan_view(session_id, False, pending=True))
        assert await plan_of(watcher, session_id) == plan(False, pending=True)

        held.release()  # the tool step's result goes back: the next request commits it
        await watcher.next_frame(is_plan_event(session_id, active=True))
        await watcher.next_frame(is_idle(session_id))
        for client in (watcher, chooser):
            assert await plan_of(client, session_id) == plan(True)
