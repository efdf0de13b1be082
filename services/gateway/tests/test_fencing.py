"""Fences: per account, bounded, and a request id is used up only when applied."""

from __future__ import annotations

import pytest

from services.common.errors import SessionNotFound
from services.gateway.fencing import Fence, Fences, Stale

SESSION = "s-1"


def fence(request_id: int, generation: int = 0, account: str = "alice") -> Fence:
    return Fence(account, "laptop", generation, request_id)


def test_another_accounts_client_with_my_id_fences_only_itself() -> None:
    fences = Fences()
    fences.connect("bob", "laptop", 9)
    with fences.mutation(fence(50, 9, account="bob"), SESSION):
        pass
    fences.connect("alice", "laptop", 0)
    with fences.mutation(fence(1), SESSION):
        pass
    with pytest.raises(Stale):
        fences.connect("bob", "laptop", 8)


def test_a_refused_request_keeps_its_id_and_an_applied_one_uses_it_up() -> None:
    fences = Fences()
    with pytest.raises(SessionNotFound), fences.mutation(fence(1), SESSION):
        raise SessionNotFound(SESSION)
    with fences.mutation(fence(1), SESSION):
        pass
    with pytest.raises(Stale), fences.mutation(fence(1), SESSION):
        pass


def test_an_unknown_outcome_uses_the_id_up() -> None:
    fences = Fences()
    with pytest.raises(TimeoutError), fences.mutation(fence(1), SESSION):
        raise TimeoutError
    with pytest.raises(Stale), fences.mutation(fence(1), SESSION):
        pass


def test_a_request_in_flight_fences_its_duplicates_and_older_ones() -> None:
    fences = Fences()
    with fences.mutation(fence(5), SESSION):
        for duplicate_or_older in (5, 4):
            with pytest.raises(Stale), fences.mutation(fence(duplicate_or_older), SESSION):
                pass
        with fences.mutation(fence(6), SESSION):
            pass
    with pytest.raises(Stale), fences.mutation(fence(6), SESSION):
        pass


def test_the_tables_are_bounded() -> None:
    fences = Fences(limit=3)
    for n in range(10):
        fences.connect("alice", f"client-{n}", 1)
        with fences.mutation(Fence("alice", f"client-{n}", 1, 1), f"s-{n}"):
            pass
    assert len(fences._generations) == 3 and len(fences._requests) == 3
    # A forgotten client is admitted again, the recent ones are still fenced.
    fences.connect("alice", "client-0", 0)
    with pytest.raises(Stale):
        fences.connect("alice", "client-9", 0)
