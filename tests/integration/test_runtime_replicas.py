"""Two agent-runtime replicas behind one gateway, each service its own
process: the gateway's runtime address names both replicas, as a load
balancer's or a headless service's name would.

A client never learns where its session runs. Its prompt reaches the
replica that owns the session (the first replica turns the gateway away
with the owner's address), the text that replica streams reaches the
client live, and when the owner is killed mid-turn the other replica takes
the session over: the client sees the turn end as interrupted, and its next
prompt runs without the client doing anything but prompting again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.runtime.v1 import runtime_pb2_grpc as rt_grpc
from agenthost.sessionlog.v1 import events_pb2 as ev

from clients.sdk import AgentHostClient
from clients.sdk.session import Session
from services.common.client import open_channel
from services.common.internal_auth import TOKEN_ENV, new_token
from services.common.topology import ADDRESS_ENV
from services.sessionlog.client import SessionLogClient
from tests.support.hosts import ServiceProcess
from tests.support.process_stack import LOG_LEVEL

WAIT_S = 30.0
# Short, so the survivor takes over soon after the owner dies.
LEASE_S = "1.5"
STREAMED = "Streaming from the owner"
# The owner's model: a streamed reply that then holds the turn open.
HOLD = {"replies": [{"text": STREAMED, "parts": 4, "delta_s": 0.02, "hold_s": 600}]}


@dataclass
class TwoRuntimes:
    data_dir: Path
    token: str
    services: dict[str, ServiceProcess]
    first: ServiceProcess
    second: ServiceProcess
    gateway: ServiceProcess

    def client_token(self) -> str:
        return (self.data_dir / "token").read_text().strip()


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[TwoRuntimes]:
    """Session log, plan mode, projection and workspace once; the runtime
    twice (the second streams and holds its replies); one gateway."""
    token = new_token()
    shared = {TOKEN_ENV: token, "AGENTHOST_LOG_LEVEL": LOG_LEVEL, "AGENTHOST_LEASE_S": LEASE_S}
    started: list[ServiceProcess] = []

    async def start(name: str, **env: str) -> ServiceProcess:
        process = ServiceProcess(f"services.{name}", tmp_path, env={**shared, **env})
        started.append(process)
        await process.start()
        shared[ADDRESS_ENV[name]] = process.address
        return process

    script = tmp_path / "hold.json"
    script.write_text(json.dumps(HOLD))
    try:
        services = {name: await start(name) for name in ("sessionlog", "planmode")}
        services |= {name: await start(name) for name in ("projection", "workspace")}
        first = await start("agentruntime")
        second = await start("agentruntime", AGENTHOST_BUILTIN_SCRIPT=str(script))
        shared[ADDRESS_ENV["agentruntime"]] = f"ipv4:{first.address},{second.address}"
        gateway = await start("gateway")
        yield TwoRuntimes(tmp_path, token, services, first, second, gateway)
    finally:
        for process in reversed(started):
            process.kill()


def turn_ended(session: Session, reason: int) -> bool:
    return any(e.HasField("turn_end") and e.turn_end.reason == reason for e in session.events)


async def test_calls_reach_the_owner_its_text_streams_live_and_a_survivor_takes_over(
    stack: TwoRuntimes, tmp_path: Path
) -> None:
    async with AgentHostClient(stack.gateway.address, stack.client_token()) as client:
        created = await client.create_session(cwd=str(tmp_path))
        # The second replica takes the session first (the gateway, asked
        # cold, would place it on the first replica of its target).
        async with open_channel(stack.second.address, stack.token) as channel:
            second = rt_grpc.AgentRuntimeServiceStub(channel)
            await second.ResumeAgent(rt.ResumeAgentRequest(session_id=created.id))
        session = await client.open_session(created.id)

        await session.prompt("stream something")
        await session.wait_until(
            lambda s: STREAMED in [text for text in s.live.texts.values()], WAIT_S
        )
        async with open_channel(stack.services["sessionlog"].address, stack.token) as channel:
            lease = await SessionLogClient(channel).acquire_lease(session.id, "probe", 1.0)
        assert lease.owner == stack.second.address

        stack.second.kill()  # mid-turn, its lease left to run out
        await session.wait_until(
            lambda s: turn_ended(s, ev.TURN_END_REASON_INTERRUPTED) and not s.running, WAIT_S
        )
        await session.prompt("after the owner died")
        await session.wait_until(lambda s: turn_ended(s, ev.TURN_END_REASON_COMPLETED), WAIT_S)

        said = [e.assistant_message.text for e in session.events if e.HasField("assistant_message")]
        assert said == ["Echo: after the owner died"]
        seqs = [e.seq for e in session.events]
        assert seqs == list(range(len(seqs))), "seqs are gapless"
