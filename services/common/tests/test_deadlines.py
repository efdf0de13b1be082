"""A service never passes on more time than its caller has left, though the
timeout it received was rounded up on the wire."""

from __future__ import annotations

import asyncio
import math

from hypothesis import given
from hypothesis import strategies as st

from services.common.deadlines import downstream_timeout, set_deadline, wire_rounding


def sent_on_the_wire(remaining: float) -> float:
    """A timeout as the grpc-timeout header carries it: three significant
    digits, rounded up."""
    unit = 10 ** (math.floor(math.log10(remaining)) - 2)
    return float(math.ceil(remaining / unit) * unit)


@given(st.floats(min_value=0.001, max_value=100_000, allow_nan=False))
def test_what_is_passed_on_never_exceeds_what_the_caller_had(remaining: float) -> None:
    received = sent_on_the_wire(remaining)
    assert received >= remaining - 1e-12
    assert received - wire_rounding(received) <= remaining + 1e-9


async def test_a_rounded_up_ten_seconds_passes_on_at_most_ten() -> None:
    async def hop() -> float | None:
        set_deadline(10.1)  # a caller's 10 s, as the wire rounds it
        return downstream_timeout(30.0)

    passed_on = await asyncio.create_task(hop())
    assert passed_on is not None and passed_on <= 10.0


async def test_without_a_caller_deadline_the_default_holds() -> None:
    async def hop() -> float | None:
        set_deadline(None)
        return downstream_timeout(30.0)

    assert await asyncio.create_task(hop()) == 30.0
