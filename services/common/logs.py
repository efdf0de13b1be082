"""Structured logs: one JSON object a line, with the service name."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

# Attributes every LogRecord has; anything else was passed with `extra=`.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class RepeatLimit(logging.Filter):
    """Lets one line through per `window_s` among identical ones (same logger,
    level, message and fields); the next one let through says how many were
    dropped (`repeated`). Remembers the `keep` most recent lines.

    For lines a caller can make us write at will (e.g. refused requests)."""

    def __init__(
        self,
        window_s: float = 60.0,
        keep: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.window_s, self.keep, self.clock = window_s, keep, clock
        # line -> (when it last went through, how many were dropped since)
        self._seen: OrderedDict[tuple[Any, ...], tuple[float, int]] = OrderedDict()

    def clear(self) -> None:
        self._seen.clear()

    def filter(self, record: logging.LogRecord) -> bool:
        fields = sorted((k, repr(v)) for k, v in record.__dict__.items() if k not in _STANDARD)
        line = (record.name, record.levelno, record.getMessage(), *fields)
        now = self.clock()
        last = self._seen.pop(line, None)
        if last is not None and now - last[0] < self.window_s:
            self._seen[line] = (last[0], last[1] + 1)
            return False
        self._seen[line] = (now, 0)
        if len(self._seen) > self.keep:
            self._seen.popitem(last=False)
        if last is not None and last[1]:
            record.repeated = last[1]
        return True


def configure_logging(service: str, level: str = "INFO") -> None:
    """Log to stderr at `level`: a level name, optionally followed by
    `logger=level` pairs, e.g. "WARNING,agenthost.server=INFO" (quiet, but
    with the lifecycle lines a supervisor waits for)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    default, *loggers = level.split(",")
    root.setLevel(default.strip().upper())
    for pair in loggers:
        name, _, value = pair.partition("=")
        logging.getLogger(name.strip()).setLevel(value.strip().upper())
