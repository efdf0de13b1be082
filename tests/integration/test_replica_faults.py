"""Replicas over one PostgreSQL schema: one replica of each replicated
service, in turn, is killed (SIGKILL) under load and then started again,
while SDK clients, on a channel naming both gateways (as behind a load
balancer), keep prompting and choosing plan mode.

What a person at one of those clients would notice, asserted here:
- every client is back to full cycles (prompt, its turn ends, a plan
  choice) after each kill (made while a turn runs) and each restart,
  without being restarted: its calls move to the surviving replicas;
- no call ends UNKNOWN, INTERNAL or CANCELLED, and an internal replica
  that is away is named (PEER_UNAVAILABLE with `peer`, or `service`);
- nothing acknowledged is lost: every accepted prompt's message is in the
  log exactly once, before the seq the gateway answered with; every committed
  plan choice is the plan/mode as of its seq, and the last one is the
  session's plan; seqs are gapless from 0 and every turn is closed;
- a read through the surviving gateway shows the history the client holds.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clients.sdk import AgentHostClient
from services.common.client import open_channel
from services.common.topology import SERVICES
from services.sessionlog.client import SessionLogClient
from services.sessionlog.port import Event
from tests.support.load import (
    TURN_S,
    Driver,
    describe,
    drivers,
    everyone_cycles,
    last_turn_closed,
    stop,
    whole_log,
)
from tests.support.postgres import stack_on_postgres
from tests.support.replica_stack import ReplicaStack, replica_stack

pytestmark = pytest.mark.postgres

# Processes per service; the agent runtime's replicas share sessions by leases.
REPLICAS = {
    "sessionlog": 2,
    "planmode": 2,
    "projection": 2,
    "workspace": 2,
    "agentruntime": 2,
    "gateway": 2,
}
# Short, so a survivor takes a killed runtime's sessions over soon.
LEASE_S = "2"
CLIENTS = 3
# Each reply streams for about 0.3 s, so a kill can land mid-turn.
REPLY = {"text": "Working through it, step by step.", "parts": 6, "delta_s": 0.05}
REPLIES = 2000
# Every peer's channel (and the clients') uses a service's first replica
# while it serves (pick_first): that is the one killed.
KILLED = 0
SURVIVOR = 1
# Codes a client may see while a replica is away: typed and retryable.
UNTYPED = {"UNKNOWN", "INTERNAL", "CANCELLED"}


@pytest.fixture
async def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ReplicaStack]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [REPLY] * REPLIES}))
    async with (
        stack_on_postgres(tmp_path, monkeypatch, "kill"),
        replica_stack(
            tmp_path / "data",
            REPLICAS,
            {"AGENTHOST_BUILTIN_SCRIPT": str(script), "AGENTHOST_LEASE_S": LEASE_S},
        ) as running,
    ):
        yield running


async def test_one_replica_of_each_service_killed_under_load_loses_nothing(
    stack: ReplicaStack, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    replicated = [name for name in SERVICES if REPLICAS[name] > 1]
    async with drivers(stack.gateway, stack.token, workdir, CLIENTS) as load:
        await everyone_cycles(load, 1)
        for name in replicated:
            for step in (f"SIGKILL {name}[{KILLED}]", f"restart {name}[{KILLED}]"):
                for driver in load:
                    driver.phase = step
                try:
                    if step.startswith("SIGKILL"):
                        await _a_turn_runs(load)
                        stack.kill(name, KILLED)
                    else:
                        await stack.restart(name, KILLED)
                    await everyone_cycles(load, 2)
                except TimeoutError:
                    clients = "\n".join(d.describe() for d in load)
                    pytest.fail(f"clients did not recover after {step}:\n{clients}\n{stack.logs()}")
        await stop(load)
        assert not stack.exited(), f"{stack.exited()} ended:\n{stack.logs()}"
        failures = [f for d in load for f in d.failures]
        assert any(c.outcome == "committed" for d in load for c in d.plans)
        assert not [f for f in failures if f.code in UNTYPED], failures
        # An internal replica away is named (the gateway's own loss is the transport's).
        unnamed = [
            f
            for f in failures
            if f.code == "UNAVAILABLE" and f.away not in SERVICES and "gateway" not in f.phase
        ]
        assert not unnamed, unnamed
        async with open_channel(stack.target("sessionlog"), stack.internal_token) as channel:
            log = SessionLogClient(channel)
            for driver in load:
                await _all_kept(log, driver)
        survivor = stack.addresses("gateway")[SURVIVOR]
        async with AgentHostClient(survivor, stack.token) as reader:
            for driver in load:
                await _same_through(reader, driver)


async def _a_turn_runs(load: list[Driver]) -> None:
    """Until one of the clients sees its session run a turn (a kill then
    lands mid-turn)."""
    waits = [
        asyncio.create_task(d.session.wait_until(lambda s: s.running, within=TURN_S)) for d in load
    ]
    try:
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        await next(iter(done))  # raises TimeoutError when none ran a turn in time
    finally:
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


async def _all_kept(log: SessionLogClient, driver: Driver) -> None:
    session = driver.session
    # The turn of a prompt whose answer was lost may still run: it ends.
    await session.wait_until(lambda s: last_turn_closed(s.events), within=TURN_S)
    events = await whole_log(log, session.id)
    assert [e.seq for e in events] == list(range(len(events))), "seqs are gapless from 0"
    said = Counter(
        e.user_message.text
        for e in events
        if e.HasField("user_message") and e.user_message.text.startswith(f"{driver.label} prompt ")
    )
    assert set(said.values()) == {1}, f"{driver.label}: each prompt once: {said}"
    where = {e.user_message.text: e.seq for e in events if e.HasField("user_message")}
    for text, seq in driver.acknowledged.items():
        # The gateway answers with the session's last seq once the message is in.
        assert where.get(text, seq + 1) <= seq, (
            f"{driver.label}: {text!r} acknowledged at seq {seq}, in the log at {where.get(text)}"
        )
    modes = [(e.seq, e.plan_mode.active) for e in events if e.HasField("plan_mode")]
    for choice in driver.plans:
        if choice.outcome in ("committed", "noop"):
            # Its reply's seq is the log's as of the choice.
            # Plan mode was then as chosen (off before any plan/mode).
            then = [False] + [active for seq, active in modes if seq <= choice.seq]
            assert then[-1] == choice.active, (driver.label, choice, modes)
    started = {e.turn_start.turn_id for e in events if e.HasField("turn_start")}
    ended = {e.turn_end.turn_id for e in events if e.HasField("turn_end")}
    assert started == ended, f"every turn is closed: {[describe(e) for e in events[-8:]]}"
    # The client's window holds each event of the log exactly once.
    await session.wait_until(lambda s: s.last_seq >= events[-1].seq, within=TURN_S)
    window = [(e.seq, e.id) for e in session.events]
    first = window[0][0]
    assert window == [(e.seq, e.id) for e in events[first:]], f"{driver.label}: each event once"


async def _same_through(reader: AgentHostClient, driver: Driver) -> None:
    """What the surviving gateway shows of the driver's session: the history
    the driver's client holds, and the plan it chose last."""
    seen = await reader.open_session(driver.session.id)
    last = driver.session.last_seq
    await seen.wait_until(lambda s: s.last_seq >= last, within=TURN_S)
    assert _window(seen.events, driver.session.events) == _window(
        driver.session.events, seen.events
    ), driver.label
    assert seen.last_seq == last, driver.label
    if driver.plans and not driver.doing:  # its last cycle ended with that choice
        answer = await reader.plan_mode(driver.session.id)
        assert answer.value.state is not None, driver.label
        assert answer.value.state.active == driver.plans[-1].active, (driver.label, answer)


def _window(events: list[Event], other: list[Event]) -> list[tuple[int, str]]:
    """`events` from the first seq both windows hold, as (seq, id)."""
    first = max(events[0].seq, other[0].seq)
    return [(e.seq, e.id) for e in events if e.seq >= first]
