"""Tasks a service starts on its own behalf.

`asyncio.create_task` copies the current context, and a service's context
carries the deadline and account of the call being served (see deadlines.py
and the gateway's accounts.py). A turn, a shared load or a follower started
inside a call must outlive that call and never inherit its deadline, so every
task a service creates goes through `spawn`: a fresh, empty context, and an
exception that nobody awaits is logged once instead of being lost.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

from .errors import DomainError

T = TypeVar("T")

log = logging.getLogger("agenthost.tasks")


def spawn(work: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
    """Run `work` in its own task, with no per-call context of the caller."""
    task = asyncio.get_running_loop().create_task(work, name=name, context=contextvars.Context())
    task.add_done_callback(_report)
    return task


def _report(task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    error = task.exception()  # marks the exception retrieved, so asyncio stays quiet
    if error is None:
        return
    # A domain error is an answer its awaiters handle; anything else is a fault.
    level = logging.DEBUG if isinstance(error, DomainError) else logging.WARNING
    log.log(level, "task %s failed: %r", task.get_name(), error)


async def run_unless(stop: asyncio.Event, work: Coroutine[Any, Any, None]) -> bool:
    """Run `work` until it ends or `stop` is set, whichever comes first.

    True when `work` ended (its exception is raised); False when `stop` cut
    it short: it is then cancelled and awaited, so its cleanup has run. A
    start-up that waits on peers must still answer SIGTERM at once."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # read here too, should our own caller be cancelled
    if task.cancelled():
        return False
    task.result()
    return True
