"""What a serving process built before it served is kept out of the
collector's way.

Python's cyclic garbage collector walks every object it tracks in a full
(oldest generation) collection. A started stack holds tens of thousands of
them (generated protobuf modules, descriptors, grpc, the services' own
tables), nearly all alive until the process ends, so a full collection took
about 100 ms, once every few seconds under load: a pause every call in flight
waits out. Frozen (gc.freeze), they are left out of every later collection.
Objects freed by their reference count still go at once, frozen or not.

For the same reason nothing is collected while a process builds what it will
serve (its imports, its services' start): the collections would walk a
growing heap of objects that stay, about 40 ms of `agenthost up`'s start-up.
Nor is the heap collected once before it is frozen: that walk took 30-50 ms
of the start-up (the first request waits it out) to free about 170 objects
of cycles made while importing, which now stay, a few kilobytes for the
life of the process."""

from __future__ import annotations

import gc


def hold_collections() -> None:
    """No collections until freeze_what_serving_built; call it first thing
    in a process that will serve."""
    gc.disable()


def freeze_what_serving_built() -> None:
    """Leave every object alive now out of later collections, and collect
    again from now on (after hold_collections); call it once a process
    serves."""
    gc.freeze()
    gc.enable()
