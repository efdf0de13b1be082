"""Messages of a feed sent several to a reply, within a size a peer accepts."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

from google.protobuf.message import Message

from .server import MAX_MESSAGE_BYTES

M = TypeVar("M", bound=Message)

# The most message bytes one batch carries: a quarter of the largest message
# a peer accepts, so the framing around it always fits.
BATCH_BYTES = MAX_MESSAGE_BYTES // 4


def in_batches(messages: Iterable[M], max_bytes: int = BATCH_BYTES) -> Iterator[list[M]]:
    """`messages` cut in order into runs of at most `max_bytes` (a message
    larger than that alone)."""
    batch: list[M] = []
    size = 0
    for message in messages:
        message_size = message.ByteSize()
        if batch and size + message_size > max_bytes:
            yield batch
            batch, size = [], 0
        batch.append(message)
        size += message_size
    if batch:
        yield batch
