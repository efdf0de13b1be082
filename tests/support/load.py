"""Load for fault tests: SDK clients, each on a session of its own, prompting
and choosing plan mode in a loop while a test kills and restarts services.
Each driver records what the gateway acknowledged and every call that
failed, so the test can check afterwards that nothing acknowledged is lost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from clients.sdk import AgentHostClient
from clients.sdk.connection import Backoff
from clients.sdk.errors import AgentHostError
from clients.sdk.session import Session
from services.sessionlog.client import SessionLogClient
from services.sessionlog.port import Event

# How long a client may take to be back to full cycles after a fault, and a
# turn to end: generous, they only bound a wait.
RECOVER_S = 60.0
TURN_S = 30.0


@dataclass
class Failure:
    phase: str  # the fault under way: "SIGKILL gateway", say
    action: str
    code: str
    reason: str
    # The service the error names as away (None: none named).
    away: str | None
    message: str


@dataclass(frozen=True)
class PlanChoice:
    """A plan-mode selection the gateway acknowledged."""

    active: bool
    outcome: str | None
    seq: int


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
    # Each acknowledged prompt's text and the seq the gateway answered with.
    acknowledged: dict[str, int] = field(default_factory=dict)
    plans: list[PlanChoice] = field(default_factory=list)
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
                        self.doing,
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
        self.acknowledged[text] = reply.seq
        self.doing = f"waiting for the turn after seq {reply.seq} to end"
        await session.wait_until(lambda s: turn_ended_after(s.events, reply.seq), within=TURN_S)
        self.doing = f"setting plan mode {plan}"
        chosen = await session.set_plan(plan)
        self.plans.append(PlanChoice(plan, chosen.outcome, chosen.seq))
        self.doing = ""

    def describe(self) -> str:
        session = self.session
        return (
            f"{self.label}: {self.cycles} cycles, {self.doing or 'between steps'}; "
            f"running={session.running} last_seq={session.last_seq}; "
            f"last events {[describe(e) for e in session.events[-4:]]}; "
            f"last failures {self.failures[-3:]}"
        )

    async def cycles_past(self, count: int) -> None:
        while self.cycles < count:
            self.progress.clear()
            await self.progress.wait()


def turn_ended_after(events: list[Event], seq: int) -> bool:
    return any(e.seq > seq and e.HasField("turn_end") for e in events)


@asynccontextmanager
async def drivers(
    address: str, token: str, workdir: Path, count: int, phase: str = "start"
) -> AsyncIterator[list[Driver]]:
    """`count` clients of the gateway at `address` (a gRPC target: several
    addresses make a channel that moves on when one goes away), each on a
    session of its own, putting load on it."""
    async with AsyncExitStack() as contexts:
        load = []
        for n in range(count):
            client = await contexts.enter_async_context(
                AgentHostClient(address, token, backoff=Backoff(max_s=0.5))
            )
            summary = await client.create_session(cwd=str(workdir))
            load.append(Driver(f"client {n}", await client.open_session(summary.id), phase))
        for driver in load:
            driver.task = asyncio.create_task(driver.run(), name=driver.label)
        try:
            yield load
        finally:
            await stop(load)


async def stop(load: list[Driver]) -> None:
    """End the load once each driver's cycle under way is over."""
    tasks = [d.task for d in load if d.task is not None]
    for driver in load:
        driver.stopping = True
    if tasks:
        # Cancelled only when they do not end (the test failed already).
        _, stuck = await asyncio.wait(tasks, timeout=RECOVER_S)
        for task in stuck:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def everyone_cycles(load: list[Driver], more: int) -> None:
    """Until every driver has done `more` more full cycles (TimeoutError after
    RECOVER_S)."""
    targets = [d.cycles + more for d in load]
    async with asyncio.timeout(RECOVER_S):
        await asyncio.gather(*(d.cycles_past(t) for d, t in zip(load, targets, strict=True)))


def last_turn_closed(events: list[Event]) -> bool:
    for event in reversed(events):
        if event.HasField("turn_end"):
            return True
        if event.HasField("turn_start"):
            return False
    return True


def describe(event: Event) -> str:
    kind = event.WhichOneof("body")
    detail = {
        "turn_start": event.turn_start.turn_id,
        "turn_end": f"{event.turn_end.turn_id} {event.turn_end.reason} {event.turn_end.error}",
        "user_message": event.user_message.text,
    }.get(kind or "", "")
    return f"{event.seq}:{kind} {event.id} {detail}"


async def whole_log(log: SessionLogClient, session_id: str) -> list[Event]:
    events: list[Event] = []
    while True:
        page = await log.read(session_id, from_seq=len(events))
        events.extend(page.events)
        if not page.events:
            return events
