"""The caller's deadline, carried to the calls a service makes on its behalf."""

from __future__ import annotations

import time
from contextvars import ContextVar

_deadline: ContextVar[float | None] = ContextVar("agenthost_deadline", default=None)


def set_deadline(time_remaining: float | None) -> None:
    _deadline.set(None if time_remaining is None else time.monotonic() + time_remaining)


def downstream_timeout(default: float | None) -> float | None:
    """The timeout for a downstream call: ours, capped by the caller's deadline."""
    deadline = _deadline.get()
    if deadline is None:
        return default
    remaining = max(deadline - time.monotonic(), 0.0)
    return remaining if default is None else min(default, remaining)
