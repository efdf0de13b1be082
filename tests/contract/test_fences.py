"""The gateway's fences on every store (one gateway's memory, the replicas'
PostgreSQL): a superseded generation is stale, a request id is used up only
when applied, and a request in flight fences its duplicates; against the
shared store, whichever gateway a request reaches."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.common.errors import SessionNotFound
from services.gateway.fence_store import MemoryFenceStore
from services.gateway.fencing import Fence, Fences, Stale
from services.gateway.postgres_fences import PostgresFenceStore
from tests.support.postgres import POSTGRES_DSN, drop_schema, schema_for

SESSION = "s-1"
EXAMPLES = itertools.count()
# Two gateways: each its own Fences over what the backend shares.
Pair = tuple[Fences, Fences]


def fence(request_id: int, generation: int = 0, account: str = "alice") -> Fence:
    return Fence(account, "laptop", generation, request_id)


@pytest.fixture(params=["memory", "postgres"])
async def gateways(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pair]:
    if request.param == "memory":  # one gateway: both names for its one store
        memory = MemoryFenceStore()
        yield Fences(memory), Fences(memory)
        return
    schema = schema_for(tmp_path, "fences")
    stores = [PostgresFenceStore(POSTGRES_DSN, schema) for _ in range(2)]
    await drop_schema(stores[0])
    for store in stores:
        await store.open()
    try:
        yield Fences(stores[0]), Fences(stores[1])
    finally:
        for store in stores:
            await store.close()
        await drop_schema(stores[0])


async def apply(fences: Fences, request: Fence, session_id: str = SESSION) -> None:
    async with fences.mutation(request, session_id):
        pass


async def test_a_generation_superseded_through_either_gateway_is_stale_on_both(
    gateways: Pair,
) -> None:
    one, two = gateways
    await one.connect("alice", "laptop", 1)
    await two.connect("alice", "laptop", 2)  # the client moved to gateway two
    for fences in gateways:
        with pytest.raises(Stale) as refused:
            await fences.check_read(fence(1, generation=1))
        assert refused.value.metadata["current_generation"] == "2"
    await one.check_read(fence(1, generation=2))


async def test_another_accounts_client_with_my_id_fences_only_itself(gateways: Pair) -> None:
    one, two = gateways
    await one.connect("bob", "laptop", 9)
    await apply(one, fence(50, 9, account="bob"))
    await two.connect("alice", "laptop", 0)
    await apply(two, fence(1))
    with pytest.raises(Stale):
        await one.connect("bob", "laptop", 8)


async def test_a_refused_request_keeps_its_id_and_an_applied_one_uses_it_up(
    gateways: Pair,
) -> None:
    one, two = gateways
    with pytest.raises(SessionNotFound):
        async with one.mutation(fence(1), SESSION):
            raise SessionNotFound(SESSION)
    await apply(two, fence(1))
    with pytest.raises(Stale):
        await apply(one, fence(1))


async def test_an_unknown_outcome_uses_the_id_up(gateways: Pair) -> None:
    one, two = gateways
    with pytest.raises(TimeoutError):
        async with one.mutation(fence(1), SESSION):
            raise TimeoutError
    with pytest.raises(Stale):
        await apply(two, fence(1))


async def test_a_request_in_flight_fences_its_duplicates_and_older_ones(gateways: Pair) -> None:
    one, two = gateways
    async with one.mutation(fence(5), SESSION):
        for duplicate_or_older in (5, 4):
            with pytest.raises(Stale):
                await apply(two, fence(duplicate_or_older))
        await apply(two, fence(6))
    with pytest.raises(Stale):
        await apply(one, fence(6))
    await apply(one, fence(1), "s-2")  # other sessions keep their own order


async def test_of_duplicates_sent_to_both_gateways_at_once_exactly_one_is_admitted(
    gateways: Pair,
) -> None:
    one, two = gateways
    admitted: list[str] = []
    release = asyncio.Event()

    async def send(fences: Fences, name: str) -> None:
        async with fences.mutation(fence(7), SESSION):
            admitted.append(name)
            await release.wait()

    outcomes = asyncio.gather(send(one, "one"), send(two, "two"), return_exceptions=True)
    release.set()
    results = await outcomes
    assert len(admitted) == 1
    assert sum(isinstance(r, Stale) for r in results) == 1


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.booleans()), max_size=12))
async def test_applied_orders_only_grow(
    gateways: Pair, requests: list[tuple[int, int, bool]]
) -> None:
    """Whatever mix of applied and refused requests arrives, through either
    gateway: a request is admitted only when newer than every one applied."""
    one, two = gateways
    applied: tuple[int, int] | None = None
    session = f"s-{next(EXAMPLES)}"  # the store outlives one example
    for n, (generation, request_id, succeeds) in enumerate(requests):
        fences = (one, two)[n % 2]
        request = Fence("carol", "c", generation, request_id)
        try:
            async with fences.mutation(request, session):
                assert applied is None or request.order > applied
                if not succeeds:
                    raise SessionNotFound(session)
                applied = request.order
        except (Stale, SessionNotFound):
            pass
