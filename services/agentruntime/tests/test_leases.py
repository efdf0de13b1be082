"""The runtime under session leases, over the real SQLite session log on a
hand-moved clock (a lease expires when the test says so)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.leases import lease_s_from_env
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply
from services.agentruntime.runtime import AgentRuntime
from services.common.errors import InvalidRequest, SessionOwnedElsewhere
from services.sessionlog.domain import SessionLog
from services.sessionlog.sqlite_store import SqliteSessionStore
from tests.support.clocks import ManualClock
from tests.support.events import kinds

WAIT_S = 10.0
LEASE_S = 10.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def log(tmp_path: Path, clock: ManualClock) -> AsyncIterator[SessionLog]:
    store = SqliteSessionStore(tmp_path / "sessionlog.db")
    await store.open()
    log = SessionLog(store, clock)
    await log.create_session("s", str(tmp_path))
    yield log
    await store.close()


async def idle(runtime: AgentRuntime, session_id: str) -> None:
    async with asyncio.timeout(WAIT_S):
        async for status in runtime.watch_status(session_id):
            if not status.running:
                return


async def test_a_deposed_runtime_stops_its_turn_without_writing_and_drops_the_agent(
    log: SessionLog, clock: ManualClock
) -> None:
    model = BuiltinAdapter()
    reply = model.enqueue(ScriptedReply(text="written by nobody", hold=True))
    runtime = AgentRuntime(log, model, lease_s=LEASE_S)
    await runtime.prompt("s", "first")
    await asyncio.wait_for(reply.started.wait(), WAIT_S)
    before = kinds((await log.read("s")).events)

    clock.advance(LEASE_S)  # the lease lapses (renewals run on real time: none yet)
    taken = await log.acquire_lease("s", "elsewhere", LEASE_S)
    assert taken.owner == "elsewhere" and taken.token == 2
    reply.release()
    await idle(runtime, "s")

    assert (
        kinds((await log.read("s")).events)
        == before
        == [
            "turn_start",
            "user_message",
            "session_title",
            "step_start",
            "request_header",
        ]
    )
    with pytest.raises(SessionOwnedElsewhere) as refused:
        await runtime.prompt("s", "again")
    assert refused.value.reason == "SESSION_OWNED_ELSEWHERE"
    assert refused.value.metadata["owner"] == "elsewhere"
    await runtime.close()


async def test_a_prompt_to_a_deposed_idle_runtime_hears_where_the_session_runs(
    log: SessionLog, clock: ManualClock
) -> None:
    runtime = AgentRuntime(log, BuiltinAdapter(), lease_s=LEASE_S)
    await runtime.prompt("s", "hello")
    await idle(runtime, "s")
    last_seq = (await log.get_session("s")).last_seq
    clock.advance(LEASE_S)
    await log.acquire_lease("s", "elsewhere", LEASE_S)
    with pytest.raises(SessionOwnedElsewhere) as refused:
        await runtime.prompt("s", "next")  # refused LEASE_LOST, then asked afresh
    assert refused.value.metadata["owner"] == "elsewhere"
    assert (await log.get_session("s")).last_seq == last_seq
    await runtime.close()


async def test_a_graceful_stop_hands_the_leases_over_at_once(log: SessionLog) -> None:
    runtime = AgentRuntime(log, BuiltinAdapter(), lease_s=LEASE_S)
    await runtime.prompt("s", "hello")
    await idle(runtime, "s")
    held = await log.acquire_lease("s", "next", LEASE_S)
    assert held.owner == runtime.leases.owner
    await runtime.close()
    taken = await log.acquire_lease("s", "next", LEASE_S)
    assert (taken.owner, taken.token) == ("next", held.token + 1)


async def test_a_replica_takes_a_lapsed_session_over_ends_the_open_turn_and_runs_the_next(
    log: SessionLog, clock: ManualClock
) -> None:
    model = BuiltinAdapter()
    reply = model.enqueue(ScriptedReply(text="never recorded", hold=True))
    owner = AgentRuntime(log, model, lease_s=LEASE_S)
    successor = AgentRuntime(log, BuiltinAdapter(), lease_s=LEASE_S)
    await owner.prompt("s", "first")
    await asyncio.wait_for(reply.started.wait(), WAIT_S)
    with pytest.raises(SessionOwnedElsewhere):
        await successor.prompt("s", "too soon")

    clock.advance(LEASE_S)  # the owner, stuck in its step, has not renewed
    await successor.prompt("s", "after")
    await idle(successor, "s")
    reply.release()  # the deposed owner wakes up: its writes are refused
    await idle(owner, "s")

    events = (await log.read("s")).events
    assert [e.seq for e in events] == list(range(len(events)))
    ends = [e.turn_end.reason for e in events if e.HasField("turn_end")]
    assert ends == [ev.TURN_END_REASON_INTERRUPTED, ev.TURN_END_REASON_COMPLETED]
    said = [e.assistant_message.text for e in events if e.HasField("assistant_message")]
    assert said == ["Echo: after"]
    await owner.close()
    await successor.close()


def test_the_lease_length_comes_from_the_environment() -> None:
    assert lease_s_from_env({}) == 10.0
    assert lease_s_from_env({"AGENTHOST_LEASE_S": "2.5"}) == 2.5
    for bad in ("0", "-1", "soon", "7200"):
        with pytest.raises(InvalidRequest):
            lease_s_from_env({"AGENTHOST_LEASE_S": bad})
