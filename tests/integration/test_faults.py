"""Fault injection: every service process, one at a time, is killed
(SIGKILL) and stopped (SIGTERM), then started again on its address, while
clients keep prompting and choosing plan mode through the gateway.

What a person at one of those clients would notice, asserted here:
- every client is back to full cycles (prompt, its turn ends, a plan
  choice) after each fault, without being restarted;
- a runtime killed mid-turn: the turn it left open is closed as
  `turn/end(interrupted)` by the runtime that replaces it;
- no call ends UNKNOWN, INTERNAL or CANCELLED, and no stopped service cuts
  off a call it took (SIGTERM lets them finish; a call that races the stop
  inside gRPC reaches the SDK as UNAVAILABLE, CUT_OFF);
- a service that is away is named (PEER_UNAVAILABLE with `peer`, NOT_READY
  with `service`), unless it is the gateway itself;
- nothing acknowledged is lost: every accepted prompt is in the log, seqs
  are gapless, every turn is closed, and each client's window holds each
  event of the log exactly once.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.common.client import open_channel
from services.common.internal_auth import TOKEN_ENV
from services.common.server import GRACE_OVER
from services.common.topology import SERVICES
from services.sessionlog.client import SessionLogClient
from services.sessionlog.port import Event
from tests.support.load import (
    RECOVER_S,
    TURN_S,
    Driver,
    describe,
    drivers,
    everyone_cycles,
    last_turn_closed,
    stop,
    whole_log,
)
from tests.support.process_stack import ProcessStack, process_stack

CLIENTS = 3
# Each reply streams for about 0.3 s, so a kill can land mid-turn.
REPLY = {"text": "Working through it, step by step.", "parts": 6, "delta_s": 0.05}
REPLIES = 2000
FAULTS = [(name, sig) for name in SERVICES for sig in (signal.SIGKILL, signal.SIGTERM)]
# Codes a client may see while a service is away: typed and retryable.
UNTYPED = {"UNKNOWN", "INTERNAL", "CANCELLED"}


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[ProcessStack]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [REPLY] * REPLIES}))
    async with process_stack(
        tmp_path / "data", {"AGENTHOST_BUILTIN_SCRIPT": str(script)}
    ) as running:
        yield running


async def _fault(stack: ProcessStack, name: str, sig: signal.Signals) -> None:
    if sig == signal.SIGKILL:
        stack.kill(name)
    else:
        assert await stack.terminate(name) == 0, f"{name} did not stop cleanly"
        process = stack.processes[name]
        assert not [line for line in process.lines if GRACE_OVER in line], f"{name} cut calls off"
    await stack.restart(name)


async def test_each_service_killed_and_stopped_under_load_loses_nothing(
    stack: ProcessStack, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    interrupted: list[tuple[str, int]] = []  # (session, its last seq at the kill)
    async with drivers(stack.gateway, stack.token, workdir, CLIENTS) as load:
        await everyone_cycles(load, 1)
        for name, sig in FAULTS:
            phase = f"{sig.name} {name}"
            for driver in load:
                driver.phase = phase
            try:
                if name == "agentruntime" and sig == signal.SIGKILL:
                    interrupted = await _kill_mid_turn(stack, load)
                await _fault(stack, name, sig)
                await everyone_cycles(load, 2)
            except TimeoutError:
                clients = "\n".join(d.describe() for d in load)
                pytest.fail(f"clients did not recover after {phase}:\n{clients}\n{stack.logs()}")
        await stop(load)
        failures = [f for d in load for f in d.failures]
        assert not [f for f in failures if f.code in UNTYPED], failures
        unnamed = [
            f
            for f in failures
            if f.code == "UNAVAILABLE"
            and f.away not in SERVICES
            and not f.phase.endswith(" gateway")
        ]
        assert not unnamed, unnamed
        await _nothing_lost(stack, load, interrupted)


async def _kill_mid_turn(stack: ProcessStack, load: list[Driver]) -> list[tuple[str, int]]:
    """SIGKILL the runtime while turns are open; those turns, with the last
    seq each had. The runtime is frozen (SIGSTOP) while the log is read, so
    the turns the log shows open are those the kill cuts short."""
    runtime = stack.processes["agentruntime"]
    async with _log_client(stack) as log, asyncio.timeout(RECOVER_S):
        while True:
            runtime.signal(signal.SIGSTOP)
            summaries = [await log.get_session(d.session.id) for d in load]
            open_turns = [(s.id, s.last_seq) for s in summaries if s.running]
            if open_turns:
                stack.kill("agentruntime")
                return open_turns
            runtime.signal(signal.SIGCONT)
            await load[0].cycles_past(load[0].cycles + 1)


@asynccontextmanager
async def _log_client(stack: ProcessStack) -> AsyncIterator[SessionLogClient]:
    address = stack.processes["sessionlog"].address
    async with open_channel(address, _internal_token(stack)) as channel:
        yield SessionLogClient(channel)


async def _nothing_lost(
    stack: ProcessStack, load: list[Driver], interrupted: list[tuple[str, int]]
) -> None:
    async with _log_client(stack) as log:
        for driver in load:
            await _all_kept(log, driver)
        for session_id, seq in interrupted:
            ends = [
                e.turn_end.reason
                for e in await whole_log(log, session_id)
                if e.seq > seq and e.HasField("turn_end")
            ]
            assert ends[:1] == [ev.TURN_END_REASON_INTERRUPTED], "the killed turn is closed"


async def _all_kept(log: SessionLogClient, driver: Driver) -> None:
    session = driver.session
    # The turn a cancelled driver may have started ends, and its events arrive.
    await session.wait_until(lambda s: last_turn_closed(s.events), within=TURN_S)
    events = await whole_log(log, session.id)
    await session.wait_until(lambda s: s.last_seq >= events[-1].seq, within=TURN_S)
    assert [e.seq for e in events] == list(range(len(events))), "seqs are gapless"
    said = {e.user_message.text for e in events if e.HasField("user_message")}
    assert set(driver.acknowledged) <= said, "every accepted prompt is in the log"
    started = {e.turn_start.turn_id for e in events if e.HasField("turn_start")}
    ended = {e.turn_end.turn_id for e in events if e.HasField("turn_end")}
    open_turns = started - ended
    assert not open_turns, f"every turn is closed: {_around(events, open_turns)}"
    window = [(e.seq, e.id) for e in session.events]
    first = window[0][0]
    assert window == [(e.seq, e.id) for e in events[first:]], "each event exactly once"


def _around(events: list[Event], turns: set[str]) -> list[str]:
    """The events from a little before the first of `turns` on, for a message."""
    first = min(e.seq for e in events if e.turn_start.turn_id in turns)
    return [describe(e) for e in events if e.seq >= first - 8]


def _internal_token(stack: ProcessStack) -> str:
    return stack.processes["sessionlog"].env[TOKEN_ENV]
