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
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from clients.sdk import AgentHostClient
from clients.sdk.connection import Backoff
from clients.sdk.errors import AgentHostError
from clients.sdk.session import Session
from services.common.client import open_channel
from services.common.internal_auth import TOKEN_ENV
from services.common.server import GRACE_OVER
from services.common.topology import SERVICES
from services.sessionlog.client import SessionLogClient
from services.sessionlog.port import Event
from tests.support.process_stack import ProcessStack, process_stack

CLIENTS = 3
# Each reply streams for about 0.3 s, so a kill can land mid-turn.
REPLY = {"text": "Working through it, step by step.", "parts": 6, "delta_s": 0.05}
REPLIES = 2000
# How long a client may take to be back to full cycles after a restart, and
# a turn to end: generous, they only bound a wait.
RECOVER_S = 60.0
TURN_S = 30.0
FAULTS = [(name, sig) for name in SERVICES for sig in (signal.SIGKILL, signal.SIGTERM)]
# Codes a client may see while a service is away: typed and retryable.
UNTYPED = {"UNKNOWN", "INTERNAL", "CANCELLED"}


@dataclass
class Failure:
    phase: str  # the fault under way: "SIGKILL gateway", say
    action: str
    code: str
    reason: str
    # The service the error names as away (None: none named).
    away: str | None
    message: str


@dataclass
class Driver:
    """One client's load on its session: prompt, wait for the turn to end,
    choose plan mode; again. It records what the gateway accepted and every
    call that failed."""

    label: str
    session: Session
    phase: str = "start"
    # What the driver waits on now (for a failure's message).
    doing: str = ""
    cycles: int = 0
    acknowledged: list[str] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    progress: asyncio.Event = field(default_factory=asyncio.Event)
    # Set to end the load after the cycle under way (a cancelled cycle could
    # leave a prompt in flight, whose turn starts after the checks).
    stopping: bool = False
    task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        n = 0
        while not self.stopping:
            n += 1
            try:
                await self._cycle(f"{self.label} prompt {n}", plan=n % 2 == 0)
            except AgentHostError as error:
                self.failures.append(
                    Failure(
                        self.phase,
                        "cycle",
                        error.code,
                        error.reason,
                        error.metadata.get("peer") or error.metadata.get("service"),
                        error.message,
                    )
                )
                # Back off before trying again, as a person would.
                await asyncio.sleep(0.1)
                continue
            self.cycles += 1
            self.progress.set()

    async def _cycle(self, text: str, plan: bool) -> None:
        session = self.session
        # A prompt whose answer was lost (the gateway died) may have started
        # a turn: wait for it as for one of ours.
        self.doing = "waiting for idle"
        await session.wait_until(lambda s: not s.running, within=TURN_S)
        self.doing = f"prompting {text!r}"
        reply = await session.prompt(text)
        self.acknowledged.append(text)
        self.doing = f"waiting for the turn after seq {reply.seq} to end"
        await session.wait_until(lambda s: _turn_ended_after(s.events, reply.seq), within=TURN_S)
        self.doing = f"setting plan mode {plan}"
        await session.set_plan(plan)
        self.doing = ""

    def describe(self) -> str:
        session = self.session
        return (
            f"{self.label}: {self.cycles} cycles, {self.doing or 'between steps'}; "
            f"running={session.running} last_seq={session.last_seq}; "
            f"last events {[_describe(e) for e in session.events[-4:]]}; "
            f"last failures {self.failures[-3:]}"
        )

    async def cycles_past(self, count: int) -> None:
        while self.cycles < count:
            self.progress.clear()
            await self.progress.wait()


def _turn_ended_after(events: list[Event], seq: int) -> bool:
    return any(e.seq > seq and e.HasField("turn_end") for e in events)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[ProcessStack]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [REPLY] * REPLIES}))
    async with process_stack(
        tmp_path / "data", {"AGENTHOST_BUILTIN_SCRIPT": str(script)}
    ) as running:
        yield running


@asynccontextmanager
async def _drivers(stack: ProcessStack, workdir: Path) -> AsyncIterator[list[Driver]]:
    """CLIENTS clients, each on a session of its own, putting load on it."""
    async with AsyncExitStack() as contexts:
        drivers = []
        for n in range(CLIENTS):
            client = await contexts.enter_async_context(
                AgentHostClient(stack.gateway, stack.token, backoff=Backoff(max_s=0.5))
            )
            summary = await client.create_session(cwd=str(workdir))
            drivers.append(Driver(f"client {n}", await client.open_session(summary.id)))
        for driver in drivers:
            driver.task = asyncio.create_task(driver.run(), name=driver.label)
        try:
            yield drivers
        finally:
            await _stop(drivers)


async def _stop(drivers: list[Driver]) -> None:
    """End the load once each driver's cycle under way is over."""
    load = [d.task for d in drivers if d.task is not None]
    for driver in drivers:
        driver.stopping = True
    if load:
        # Cancelled only when they do not end (the test failed already).
        _, stuck = await asyncio.wait(load, timeout=RECOVER_S)
        for task in stuck:
            task.cancel()
        await asyncio.gather(*load, return_exceptions=True)


async def _everyone_cycles(drivers: list[Driver], more: int) -> None:
    targets = [d.cycles + more for d in drivers]
    async with asyncio.timeout(RECOVER_S):
        await asyncio.gather(*(d.cycles_past(t) for d, t in zip(drivers, targets, strict=True)))


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
    async with _drivers(stack, workdir) as drivers:
        await _everyone_cycles(drivers, 1)
        for name, sig in FAULTS:
            phase = f"{sig.name} {name}"
            for driver in drivers:
                driver.phase = phase
            try:
                if name == "agentruntime" and sig == signal.SIGKILL:
                    interrupted = await _kill_mid_turn(stack, drivers)
                await _fault(stack, name, sig)
                await _everyone_cycles(drivers, 2)
            except TimeoutError:
                clients = "\n".join(d.describe() for d in drivers)
                pytest.fail(f"clients did not recover after {phase}:\n{clients}\n{stack.logs()}")
        await _stop(drivers)
        failures = [f for d in drivers for f in d.failures]
        assert not [f for f in failures if f.code in UNTYPED], failures
        unnamed = [
            f
            for f in failures
            if f.code == "UNAVAILABLE"
            and f.away not in SERVICES
            and not f.phase.endswith(" gateway")
        ]
        assert not unnamed, unnamed
        await _nothing_lost(stack, drivers, interrupted)


async def _kill_mid_turn(stack: ProcessStack, drivers: list[Driver]) -> list[tuple[str, int]]:
    """SIGKILL the runtime while turns are open; those turns, with the last
    seq each had. The runtime is frozen (SIGSTOP) while the log is read, so
    the turns the log shows open are those the kill cuts short."""
    runtime = stack.processes["agentruntime"]
    async with _log_client(stack) as log, asyncio.timeout(RECOVER_S):
        while True:
            runtime.signal(signal.SIGSTOP)
            summaries = [await log.get_session(d.session.id) for d in drivers]
            open_turns = [(s.id, s.last_seq) for s in summaries if s.running]
            if open_turns:
                stack.kill("agentruntime")
                return open_turns
            runtime.signal(signal.SIGCONT)
            await drivers[0].cycles_past(drivers[0].cycles + 1)


@asynccontextmanager
async def _log_client(stack: ProcessStack) -> AsyncIterator[SessionLogClient]:
    address = stack.processes["sessionlog"].address
    async with open_channel(address, _internal_token(stack)) as channel:
        yield SessionLogClient(channel)


async def _nothing_lost(
    stack: ProcessStack, drivers: list[Driver], interrupted: list[tuple[str, int]]
) -> None:
    async with _log_client(stack) as log:
        for driver in drivers:
            await _all_kept(log, driver)
        for session_id, seq in interrupted:
            ends = [
                e.turn_end.reason
                for e in await _whole_log(log, session_id)
                if e.seq > seq and e.HasField("turn_end")
            ]
            assert ends[:1] == [ev.TURN_END_REASON_INTERRUPTED], "the killed turn is closed"


async def _all_kept(log: SessionLogClient, driver: Driver) -> None:
    session = driver.session
    # The turn a cancelled driver may have started ends, and its events arrive.
    await session.wait_until(lambda s: _last_turn_closed(s.events), within=TURN_S)
    events = await _whole_log(log, session.id)
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


def _last_turn_closed(events: list[Event]) -> bool:
    for event in reversed(events):
        if event.HasField("turn_end"):
            return True
        if event.HasField("turn_start"):
            return False
    return True


def _around(events: list[Event], turns: set[str]) -> list[str]:
    """The events from a little before the first of `turns` on, for a message."""
    first = min(e.seq for e in events if e.turn_start.turn_id in turns)
    return [_describe(e) for e in events if e.seq >= first - 8]


def _describe(event: Event) -> str:
    kind = event.WhichOneof("body")
    detail = {
        "turn_start": event.turn_start.turn_id,
        "turn_end": f"{event.turn_end.turn_id} {event.turn_end.reason} {event.turn_end.error}",
        "user_message": event.user_message.text,
    }.get(kind or "", "")
    return f"{event.seq}:{kind} {event.id} {detail}"


def _internal_token(stack: ProcessStack) -> str:
    return stack.processes["sessionlog"].env[TOKEN_ENV]


async def _whole_log(log: SessionLogClient, session_id: str) -> list[Event]:
    events: list[Event] = []
    while True:
        page = await log.read(session_id, from_seq=len(events))
        events.extend(page.events)
        if not page.events:
            return events
