"""Lines a caller can make a service write at will are rate-limited: one of
each kind per window, and the next one says how many were dropped."""

from __future__ import annotations

import logging

from services.common.logs import RepeatLimit, configure_logging


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _line(method: str) -> logging.LogRecord:
    record = logging.LogRecord("agenthost.rpc.refused", logging.WARNING, "", 0, "refused", (), None)
    record.method = method
    return record


def test_identical_lines_pass_once_a_window_and_then_say_how_many_were_dropped() -> None:
    clock = Clock()
    limit = RepeatLimit(window_s=60.0, clock=clock)
    passed = [limit.filter(_line("/a")) for _ in range(100)]
    assert passed.count(True) == 1
    assert limit.filter(_line("/b")), "another method's line is another line"
    clock.now = 61.0
    again = _line("/a")
    assert limit.filter(again)
    assert again.__dict__["repeated"] == 99
    assert not limit.filter(_line("/a"))


def test_it_remembers_a_bounded_number_of_lines() -> None:
    limit = RepeatLimit(keep=10, clock=Clock())
    for index in range(1000):
        assert limit.filter(_line(f"/{index}"))
    assert limit.filter(_line("/0")), "forgotten, so it passes again"
    assert len(limit._seen) == 10


def test_a_level_may_name_loggers_that_log_more_or_less() -> None:
    root, server = logging.getLogger(), logging.getLogger("agenthost.server")
    saved = (root.handlers[:], root.level, server.level)
    try:
        configure_logging("test", "warning, agenthost.server=info")
        assert root.level == logging.WARNING
        assert server.isEnabledFor(logging.INFO)
        assert not logging.getLogger("agenthost.rpc").isEnabledFor(logging.INFO)
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
        server.setLevel(saved[2])
