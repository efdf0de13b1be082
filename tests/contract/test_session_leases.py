"""Session leases and their fencing tokens, on every backend, through the
session-log port both in process and over gRPC (the same answers and the
same domain errors).

Expiry is driven by a hand-moved clock on the log, so no test waits for time
to pass.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from agenthost.sessionlog.v1 import session_log_pb2_grpc as pb_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.common.errors import LeaseLost, SessionNotFound
from services.common.server import ServiceDefinition
from services.sessionlog.client import SessionLogClient
from services.sessionlog.domain import SessionLog
from services.sessionlog.port import SessionLogPort
from services.sessionlog.servicer import SERVICE_NAME, SessionLogServicer
from tests.support.clocks import ManualClock
from tests.support.events import kinds, user
from tests.support.hosts import running_host
from tests.support.stores import OpenLog

TTL_S = 10.0


@dataclass
class Leases:
    port: SessionLogPort  # what a runtime uses
    clock: ManualClock

    async def session(self, session_id: str) -> str:
        await self.port.create_session(session_id, "/w")
        await self.port.append(session_id, [user("hello")])
        return session_id


@pytest.fixture(params=["in-process", "grpc"])
async def leases(
    request: pytest.FixtureRequest, reopen: OpenLog, tmp_path: Path
) -> AsyncIterator[Leases]:
    await reopen()
    clock = ManualClock()
    log = SessionLog(reopen.store, clock)
    if request.param == "in-process":
        yield Leases(log, clock)
        return

    def register(server: grpc.aio.Server) -> None:
        pb_grpc.add_SessionLogServiceServicer_to_server(SessionLogServicer(log), server)

    # The store stays the fixture's to open and close.
    served = ServiceDefinition([SERVICE_NAME], register)
    async with running_host("sessionlog", served, tmp_path) as (_, channel):
        yield Leases(SessionLogClient(channel), clock)


async def test_a_free_session_is_taken_with_token_one_and_held_against_others(
    leases: Leases,
) -> None:
    session = await leases.session("s")
    lease = await leases.port.acquire_lease(session, "a", TTL_S)
    assert (lease.session_id, lease.owner, lease.token) == (session, "a", 1)
    assert lease.expires_at_us == leases.clock.now_us + int(TTL_S * 1_000_000)
    held = await leases.port.acquire_lease(session, "b", TTL_S)
    assert held == lease  # answered as a holds it: b did not get it
    leases.clock.advance(1)
    again = await leases.port.acquire_lease(session, "a", TTL_S)
    assert (again.owner, again.token) == ("a", 1)  # the owner's own: same token
    assert again.expires_at_us > lease.expires_at_us


async def test_a_takeover_after_expiry_increments_the_token_and_fences_the_old_owner(
    leases: Leases,
) -> None:
    session = await leases.session("s")
    old = await leases.port.acquire_lease(session, "a", TTL_S)
    await leases.port.append(session, [user("by a")], lease_token=old.token)
    leases.clock.advance(TTL_S)
    new = await leases.port.acquire_lease(session, "b", TTL_S)
    assert (new.owner, new.token) == ("b", old.token + 1)

    with pytest.raises(LeaseLost) as raised:
        await leases.port.append(session, [user("late a")], lease_token=old.token)
    assert raised.value.reason == "LEASE_LOST"
    assert raised.value.metadata["current_token"] == str(new.token)
    with pytest.raises(LeaseLost):
        await leases.port.renew_lease(session, "a", old.token, TTL_S)

    await leases.port.append(session, [user("by b")], lease_token=new.token)
    await leases.port.append(session, [user("by a client")])  # unfenced writers go on
    events = (await leases.port.read(session)).events
    assert [e.user_message.text for e in events] == ["hello", "by a", "by b", "by a client"]
    assert [e.seq for e in events] == [0, 1, 2, 3]


async def test_an_owner_taking_its_own_expired_lease_gets_a_new_token(leases: Leases) -> None:
    session = await leases.session("s")
    first = await leases.port.acquire_lease(session, "a", TTL_S)
    leases.clock.advance(TTL_S + 1)
    second = await leases.port.acquire_lease(session, "a", TTL_S)
    assert (second.owner, second.token) == ("a", first.token + 1)


async def test_renewal_keeps_the_lease_from_expiring(leases: Leases) -> None:
    session = await leases.session("s")
    lease = await leases.port.acquire_lease(session, "a", TTL_S)
    leases.clock.advance(TTL_S * 0.8)
    renewed = await leases.port.renew_lease(session, "a", lease.token, TTL_S)
    assert renewed.token == lease.token and renewed.expires_at_us > lease.expires_at_us
    leases.clock.advance(TTL_S * 0.8)  # past the first expiry, not the renewed one
    assert (await leases.port.acquire_lease(session, "b", TTL_S)).owner == "a"
    leases.clock.advance(TTL_S * 0.2)
    assert (await leases.port.acquire_lease(session, "b", TTL_S)).owner == "b"


async def test_an_expired_lease_nobody_took_is_still_its_owners(leases: Leases) -> None:
    """The token decides, not the clock: until a successor acquires, the
    owner's writes and renewal go through (no one else can have written)."""
    session = await leases.session("s")
    lease = await leases.port.acquire_lease(session, "a", TTL_S)
    leases.clock.advance(TTL_S * 2)
    await leases.port.append(session, [user("still a")], lease_token=lease.token)
    renewed = await leases.port.renew_lease(session, "a", lease.token, TTL_S)
    assert renewed.token == lease.token
    assert (await leases.port.acquire_lease(session, "b", TTL_S)).owner == "a"


async def test_release_hands_the_session_over_at_once_with_a_higher_token(
    leases: Leases,
) -> None:
    session = await leases.session("s")
    lease = await leases.port.acquire_lease(session, "a", TTL_S)
    assert await leases.port.release_lease(session, "a", lease.token)
    assert not await leases.port.release_lease(session, "a", lease.token)  # a retry: no-op
    taken = await leases.port.acquire_lease(session, "b", TTL_S)
    assert (taken.owner, taken.token) == ("b", lease.token + 1)
    assert not await leases.port.release_lease(session, "a", lease.token)
    with pytest.raises(LeaseLost):
        await leases.port.append(session, [user("late a")], lease_token=lease.token)
    assert (await leases.port.acquire_lease(session, "c", TTL_S)).owner == "b"


async def test_a_token_the_session_never_had_is_refused(leases: Leases) -> None:
    session = await leases.session("s")
    with pytest.raises(LeaseLost):
        await leases.port.append(session, [user("x")], lease_token=1)  # never leased
    lease = await leases.port.acquire_lease(session, "a", TTL_S)
    with pytest.raises(LeaseLost):
        await leases.port.append(session, [user("x")], lease_token=lease.token + 1)
    with pytest.raises(LeaseLost):
        await leases.port.renew_lease(session, "b", lease.token, TTL_S)  # not b's
    assert kinds((await leases.port.read(session)).events) == ["user_message"]


async def test_a_lazy_session_can_be_leased_and_an_unknown_one_cannot(leases: Leases) -> None:
    await leases.port.create_session("lazy", "/w")
    lease = await leases.port.acquire_lease("lazy", "a", TTL_S)
    await leases.port.append("lazy", [user("first")], lease_token=lease.token)
    assert (await leases.port.get_session("lazy")).last_seq == 0
    with pytest.raises(SessionNotFound):
        await leases.port.acquire_lease("nowhere", "a", TTL_S)


async def test_a_refused_batch_in_a_wave_leaves_its_neighbours_alone(leases: Leases) -> None:
    """The token is checked in the wave's own transaction, per batch."""
    session = await leases.session("s")
    old = await leases.port.acquire_lease(session, "a", TTL_S)
    leases.clock.advance(TTL_S)
    new = await leases.port.acquire_lease(session, "b", TTL_S)
    outcomes = await asyncio.gather(
        leases.port.append(session, [user("b1")], lease_token=new.token),
        leases.port.append(session, [user("a1")], lease_token=old.token),
        leases.port.append(session, [user("b2")], lease_token=new.token),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], LeaseLost)
    events = (await leases.port.read(session)).events
    assert [e.user_message.text for e in events] == ["hello", "b1", "b2"]


_EXAMPLES = itertools.count()


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    owners=st.integers(2, 6),
    start=st.sampled_from(["free", "expired", "released"]),
)
async def test_of_concurrent_acquirers_exactly_one_wins(
    leases: Leases, owners: int, start: str
) -> None:
    session = await leases.session(f"race-{next(_EXAMPLES)}")
    before = 0
    if start != "free":
        lease = await leases.port.acquire_lease(session, "earlier", TTL_S)
        before = lease.token
        if start == "expired":
            leases.clock.advance(TTL_S)
        else:
            await leases.port.release_lease(session, "earlier", lease.token)
    names = [f"o{n}" for n in range(owners)]
    answers = await asyncio.gather(
        *(leases.port.acquire_lease(session, name, TTL_S) for name in names)
    )
    assert len({(a.owner, a.token) for a in answers}) == 1
    winner = answers[0]
    assert winner.owner in names and winner.token == before + 1
    outcomes = await asyncio.gather(
        *(leases.port.append(session, [user(n)], lease_token=winner.token) for n in names),
        leases.port.append(session, [user("stale")], lease_token=max(before, 1) + 5),
        return_exceptions=True,
    )
    assert not any(isinstance(o, Exception) for o in outcomes[:-1])
    assert isinstance(outcomes[-1], LeaseLost)
