"""The integers a store can hold, checked before any store sees them.

SQLite's INTEGER and PostgreSQL's BIGINT are both signed 64-bit. Past that,
sqlite3 raises OverflowError (an UNKNOWN answer) while psycopg sends a
NUMERIC that PostgreSQL may compare happily: the two backends would disagree.
So the domain checks every caller-chosen integer here, and keeps its own
arithmetic on them (a cursor + 1) inside the range.
"""

from __future__ import annotations

from .errors import BadPageSize, InvalidRequest

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def int64(value: int, field: str, low: int = INT64_MIN, high: int = INT64_MAX) -> int:
    """`value` when low <= value <= high, else INVALID_ARGUMENT naming `field`.

    The value itself is not echoed: a huge int does not even print."""
    if not low <= value <= high:
        raise InvalidRequest(field, f"must be between {low} and {high}")
    return value


def page_size(value: int, field: str, high: int = INT64_MAX) -> int:
    """A limit or page size: at least 1 (SQLite reads LIMIT -1 as "no limit",
    PostgreSQL refuses it) and at most `high`."""
    if not 1 <= value <= high:
        raise BadPageSize(field, f"must be between 1 and {high}")
    return value
