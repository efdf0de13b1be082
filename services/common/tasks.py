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
import signal
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from .errors import DomainError
from .heap import freeze_what_serving_built

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


async def serve_until_signalled(
    start: Callable[[], Coroutine[Any, Any, None]],
    stop: Callable[[], Awaitable[None]],
    *,
    on_up: Callable[[], None] | None = None,
    serve: Callable[[asyncio.Event], Awaitable[None]] | None = None,
) -> None:
    """Start, call `on_up`, then `serve` (by default: wait) until SIGTERM or
    SIGINT, and stop whatever happened. A signal during start-up cuts it
    short; a failed start is raised once what it had started is stopped."""
    signalled = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, signalled.set)
    try:
        if await run_unless(signalled, start()):
            if on_up is not None:
                on_up()
            # What start-up built stays out of later collections (heap.py).
            freeze_what_serving_built()
            await (serve(signalled) if serve is not None else signalled.wait())
    finally:
        await stop()
