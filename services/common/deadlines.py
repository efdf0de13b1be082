"""The caller's deadline, carried to the calls a service makes on its behalf."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_deadline: ContextVar[float | None] = ContextVar("agenthost_deadline", default=None)


def set_deadline(time_remaining: float | None) -> None:
    """Record the caller's deadline, from the time gRPC says it has left."""
    if time_remaining is None:
        _deadline.set(None)
        return
    _deadline.set(time.monotonic() + time_remaining - wire_rounding(time_remaining))


@contextmanager
def callers_deadline_kept() -> Iterator[None]:
    """The deadline as it was before the `with`, afterwards: a peer's handler
    run in its caller's task (local.py) records its own through its guard."""
    kept = _deadline.get()
    try:
        yield
    finally:
        _deadline.set(kept)


def wire_rounding(time_remaining: float) -> float:
    """How much gRPC's wire encoding may have added to a timeout.

    The grpc-timeout header carries at most three significant digits and the
    sender rounds up (a 10 s timeout sent after a few microseconds arrives as
    10.1 s), so the time a server sees can exceed what its caller has by up to
    one unit of the last digit: milliseconds below 1 s, then 10 ms, 100 ms,
    1 s... Taking that unit off means a service never passes on more time
    than its caller has left."""
    if time_remaining < 1.0:
        return 0.001
    return float(10 ** (math.floor(math.log10(time_remaining)) - 2))


def downstream_timeout(default: float | None) -> float | None:
    """The timeout for a downstream call: ours, capped by the caller's deadline."""
    deadline = _deadline.get()
    if deadline is None:
        return default
    remaining = max(deadline - time.monotonic(), 0.0)
    return remaining if default is None else min(default, remaining)
