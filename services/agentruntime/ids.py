"""Ids of the events the runtime records: unique, or fixed where a retried
batch must carry the same ones."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from agenthost.sessionlog.v1 import events_pb2 as ev


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def replace_id(event: ev.Event, event_id: str) -> ev.Event:
    """`event` with the id given (a retried batch must carry the same ids)."""
    named = ev.Event()
    named.CopyFrom(event)
    named.id = event_id
    return named


def with_ids(events: Sequence[ev.Event]) -> list[ev.Event]:
    return [e if e.id else replace_id(e, new_id("event")) for e in events]
