"""What a hung test was waiting for. pytest-timeout dumps the threads'
stacks when a test runs out of time, but an async test hangs with its
thread idle in the event loop's select(), and the stacks say nothing of the
awaits that never completed. So a moment before pytest-timeout fires, every
asyncio task's stack is printed: the await that never completed is there.

A timer thread signals the main thread (SIGUSR1); the handler runs there,
between select() and the loop, where the running loop and its tasks are."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from types import FrameType
from typing import Any

# Seconds before pytest-timeout's own dump.
AHEAD_S = 2.0

_timers: dict[str, threading.Timer] = {}


def dump_tasks(signum: int, frame: FrameType | None) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return  # not an async test, or not inside the loop: the thread dump says it all
    tasks = asyncio.all_tasks(loop)
    print(f"\n+++ {len(tasks)} asyncio tasks of the hung test +++", file=sys.stderr)
    for task in tasks:
        print(f"--- {task!r}", file=sys.stderr)
        task.print_stack(file=sys.stderr)
    sys.stderr.flush()


def start(nodeid: str, timeout_s: float) -> None:
    """Arm the dump for a test that runs out of `timeout_s`."""
    if timeout_s <= AHEAD_S or threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGUSR1, dump_tasks)
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(timeout_s - AHEAD_S, signal.pthread_kill, (main, signal.SIGUSR1))
    timer.daemon = True
    _timers[nodeid] = timer
    timer.start()


def cancel(nodeid: str) -> None:
    timer = _timers.pop(nodeid, None)
    if timer is not None:
        timer.cancel()


def set_timer(item: Any, settings: Any) -> None:
    """pytest-timeout's pytest_timeout_set_timer, run before its own."""
    if getattr(settings, "timeout", None):
        start(item.nodeid, float(settings.timeout))


def cancel_timer(item: Any) -> None:
    cancel(item.nodeid)
