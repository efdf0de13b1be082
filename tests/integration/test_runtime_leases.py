"""Two agent-runtime replicas, each its own process, over one session log
process (SQLite, or PostgreSQL as replicas share it in a deployment).

Replica A owns a session and is killed mid-turn; replica B, which turned the
session away while A held it, takes it over once A's lease runs out: the log
shows the turn closed as interrupted, B runs the next prompt, and a write
under A's old token is refused LEASE_LOST. Nothing here waits on time: each
step waits for the log to show what it expects (with a timeout).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.runtime.v1 import runtime_pb2_grpc as rt_grpc
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.common.client import open_channel
from services.common.errors import LeaseLost
from services.common.internal_auth import TOKEN_ENV, new_token
from services.common.status import error_info
from services.common.topology import ABSENT, ADDRESS_ENV
from services.sessionlog.client import SessionLogClient
from services.sessionlog.port import Event
from services.sessionlog.postgres_store import PostgresSessionStore
from tests.support.events import user
from tests.support.hosts import ServiceProcess
from tests.support.postgres import POSTGRES_DSN, drop_schema
from tests.support.process_stack import LOG_LEVEL
from tests.support.rpc import expect_rpc_error, reason_of

# Short, so B takes over soon after A dies; renewed every half second.
LEASE_S = "1.5"
WAIT_S = 30.0
# A's model: a reply that holds the turn open until the process dies.
HOLD = {"replies": [{"text": "Thinking it over", "hold_s": 600}]}


@pytest.fixture(params=["sqlite", "postgres"])
async def log_process(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ServiceProcess]:
    token = new_token()
    env = {TOKEN_ENV: token, "AGENTHOST_LOG_LEVEL": LOG_LEVEL}
    schema = f"leases_{tmp_path.name.lower().replace('-', '_')}_{os.getpid()}"
    if request.param == "postgres":
        env |= {"AGENTHOST_SESSIONLOG_DSN": POSTGRES_DSN, "AGENTHOST_SESSIONLOG_SCHEMA": schema}
    process = ServiceProcess("services.sessionlog", tmp_path / "data", env=env)
    await process.start()
    try:
        yield process
    finally:
        process.kill()
        if request.param == "postgres":
            await drop_schema(PostgresSessionStore(POSTGRES_DSN, schema))


def runtime_process(
    log: ServiceProcess, tmp_path: Path, script: Path | None, lease_s: str = LEASE_S
) -> ServiceProcess:
    env = {
        TOKEN_ENV: log.env[TOKEN_ENV],
        "AGENTHOST_LOG_LEVEL": LOG_LEVEL,
        ADDRESS_ENV["sessionlog"]: log.address,
        ADDRESS_ENV["planmode"]: ABSENT,
        "AGENTHOST_LEASE_S": lease_s,
    }
    if script is not None:
        env["AGENTHOST_BUILTIN_SCRIPT"] = str(script)
    return ServiceProcess("services.agentruntime", tmp_path / "data", env=env)


async def next_event(
    log: SessionLogClient, session_id: str, after_seq: int, wanted: Callable[[Event], bool]
) -> Event:
    """The first event after `after_seq` that is `wanted`, followed live."""
    async with asyncio.timeout(WAIT_S):
        async for item in log.subscribe(session_id, after_seq):
            if isinstance(item, Event) and wanted(item):
                return item
    raise AssertionError("the subscription ended")


async def test_a_replica_takes_over_the_session_of_one_killed_mid_turn(
    log_process: ServiceProcess, tmp_path: Path
) -> None:
    script = tmp_path / "hold.json"
    script.write_text(json.dumps(HOLD))
    a = runtime_process(log_process, tmp_path, script)
    b = runtime_process(log_process, tmp_path, None)
    await a.start()
    await b.start()
    token = log_process.env[TOKEN_ENV]
    try:
        async with (
            open_channel(log_process.address, token) as log_channel,
            open_channel(a.address, token) as a_channel,
            open_channel(b.address, token) as b_channel,
        ):
            log = SessionLogClient(log_channel)
            on_a = rt_grpc.AgentRuntimeServiceStub(a_channel)
            on_b = rt_grpc.AgentRuntimeServiceStub(b_channel)
            await log.create_session("s", str(tmp_path))

            await on_a.Prompt(rt.PromptRequest(session_id="s", text="first"))
            asked = await next_event(log, "s", -1, lambda e: e.HasField("request_header"))
            # A probe that never takes a live lease: it answers A's.
            held = await log.acquire_lease("s", "probe", 1.0)
            assert held.owner == a.address and held.token == 1

            refused = await expect_rpc_error(
                on_b.Prompt(rt.PromptRequest(session_id="s", text="too soon")),
                grpc.StatusCode.UNAVAILABLE,
            )
            assert reason_of(refused) == "SESSION_OWNED_ELSEWHERE"
            info = error_info(refused)
            assert info is not None and info.metadata["owner"] == held.owner

            a.kill()  # mid-turn: its lease now runs out unrenewed
            ended = await next_event(log, "s", asked.seq, lambda e: e.HasField("turn_end"))
            assert ended.turn_end.reason == ev.TURN_END_REASON_INTERRUPTED

            await on_b.Prompt(rt.PromptRequest(session_id="s", text="after"))
            answered = await next_event(log, "s", ended.seq, lambda e: e.HasField("turn_end"))
            assert answered.turn_end.reason == ev.TURN_END_REASON_COMPLETED

            taken = await log.acquire_lease("s", "probe", 1.0)
            assert taken.owner not in ("probe", held.owner) and taken.token == held.token + 1
            with pytest.raises(LeaseLost):
                await log.append("s", [user("late from A")], lease_token=held.token)

            events = (await log.read("s")).events
            assert [e.seq for e in events] == list(range(len(events))), "seqs are gapless"
            said = [e.assistant_message.text for e in events if e.HasField("assistant_message")]
            assert said == ["Echo: after"]
            assert "late from A" not in [e.user_message.text for e in events]
    finally:
        a.kill()
        b.kill()


async def test_a_replica_restarted_at_its_address_takes_its_sessions_back_at_once(
    log_process: ServiceProcess, tmp_path: Path
) -> None:
    """The owner id is the replica's address, so a replica killed mid-turn
    and started again where it was is still the session's owner: it ends the
    turn as interrupted on start, without waiting for a lease that would
    last ten minutes, and keeps its token (its dead self writes nothing)."""
    script = tmp_path / "hold.json"
    script.write_text(json.dumps(HOLD))
    a = runtime_process(log_process, tmp_path, script, lease_s="600")
    await a.start()
    token = log_process.env[TOKEN_ENV]
    try:
        async with open_channel(log_process.address, token) as log_channel:
            log = SessionLogClient(log_channel)
            await log.create_session("s", str(tmp_path))
            async with open_channel(a.address, token) as a_channel:
                on_a = rt_grpc.AgentRuntimeServiceStub(a_channel)
                await on_a.Prompt(rt.PromptRequest(session_id="s", text="first"))
            asked = await next_event(log, "s", -1, lambda e: e.HasField("request_header"))
            held = await log.acquire_lease("s", "probe", 1.0)
            assert held.owner == a.address

            a.kill()
            await a.start()  # the same address, a new process
            ended = await next_event(log, "s", asked.seq, lambda e: e.HasField("turn_end"))
            assert ended.turn_end.reason == ev.TURN_END_REASON_INTERRUPTED
            again = await log.acquire_lease("s", "probe", 1.0)
            assert (again.owner, again.token) == (a.address, held.token)
    finally:
        a.kill()
