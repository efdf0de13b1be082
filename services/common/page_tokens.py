"""Opaque page tokens of session lists: the place of the last row a page
showed in the list's order (most recently updated first, then by id), so
the next page starts after that row however many rows were added or moved
ahead of it meanwhile (keyset paging, not an offset).

The gateway's account-wide list and the session log's list both cut their
pages this way, with these tokens."""

from __future__ import annotations

import base64
import binascii
import json

from services.common.errors import BadPageToken
from services.common.ranges import INT64_MAX, INT64_MIN

# A row's place in the order: (-updated_at_us, id), ascending.
Place = tuple[int, str]


def encode(place: Place) -> str:
    raw = json.dumps([place[0], place[1]]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(token: str) -> Place:
    """The place a token names, or BadPageToken for one we never issued."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        first, second = json.loads(raw)
    except (ValueError, TypeError, binascii.Error) as error:
        raise BadPageToken(token) from error
    # bool is an int to Python, never one we issued; a store holds int64s only.
    if type(first) is not int or not isinstance(second, str):
        raise BadPageToken(token)
    if not INT64_MIN < first <= INT64_MAX:
        raise BadPageToken(token)
    return first, second
