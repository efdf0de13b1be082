"""The agent-runtime replicas a gateway calls, and which one runs a session.

A session's agent runs only on the runtime replica that holds its lease
(services/agentruntime/leases.py), whose owner id is the address it is
reached at. Another replica asked for that session answers
SESSION_OWNED_ELSEWHERE naming the owner, so the gateway asks the owner
instead and remembers it: calls are routed to the owner without the
replicas forwarding anything and without a client knowing where its session
runs. A session the gateway has not placed yet goes to the runtime target as
configured (pick_first: the first replica that answers), which takes the
lease when nobody holds it.

The live text of a running step exists only on its owner, so the hub
follows WatchLive on every replica it knows of: each address the target's
names resolve to (re-resolved every RESOLVE_EVERY_S, so replicas that come
and go are followed), and every owner a call was sent to. The channel to a
replica that is neither is closed: a gateway up for weeks in a cluster whose
pods come and go would otherwise keep dialling every address it ever met.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

import grpc
from agenthost.runtime.v1 import runtime_pb2_grpc as rt_grpc

from services.common.client import call_timeout, peer_call
from services.common.errors import PeerUnavailable, SessionOwnedElsewhere
from services.common.recent import Recent
from services.common.tasks import spawn
from services.common.topology import resolve_replicas

log = logging.getLogger("agenthost.gateway")

RUNTIME = "agentruntime"
# Sessions whose owner the gateway remembers, the recently used first.
PLACES_KEPT = 10_000
# How often the target's names are resolved again to find replicas.
RESOLVE_EVERY_S = 10.0

Stub = rt_grpc.AgentRuntimeServiceStub


class SessionRequest(Protocol):
    """Every runtime request the gateway routes names its session."""

    session_id: str


Dial = Callable[[str], grpc.aio.Channel]


class RuntimeReplicas:
    def __init__(self, target: str, dial: Dial) -> None:
        self.target = target
        self._dial = dial
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, Stub] = {}
        # Session -> the address of the replica that runs it.
        self._places: Recent[str, str] = Recent(PLACES_KEPT)
        # The replicas the target's names resolve to, and owners learned.
        self.resolved: set[str] = set()
        self._owners: set[str] = set()
        # Set when a replica to follow is learned (a new owner).
        self.learned = asyncio.Event()

    def stub(self, address: str) -> Stub:
        """The stub of one replica (or of the target), made once."""
        stub = self._stubs.get(address)
        if stub is None:
            self._channels[address] = channel = self._dial(address)
            stub = self._stubs[address] = Stub(channel)
        return stub

    async def call(self, method: str, request: SessionRequest) -> Any:
        """`method` of the runtime for `request.session_id`, at its owner:
        once more at the owner a replica names (domain errors raised as the
        runtime's, like peer_call)."""
        session_id: str = request.session_id
        place = self._places.recall(session_id)
        try:
            return await self._call_at(place, method, request)
        except SessionOwnedElsewhere as elsewhere:
            owner = elsewhere.metadata.get("owner", "")
            if not _is_address(owner) or owner == place:
                raise
            self._places.remember(session_id, owner)
            self._learn(owner)
            return await self._call_at(owner, method, request)
        except PeerUnavailable:
            # The owner we knew may be gone: next time ask the target again.
            if place is not None:
                self._places.pop(session_id, None)
            raise

    async def _call_at(self, place: str | None, method: str, request: SessionRequest) -> Any:
        # The target waits for a replica to come up, as every peer call does;
        # an owner that is gone fails at once (the target serves it after its
        # lease runs out).
        stub = self.stub(place if place is not None else self.target)
        rpc = getattr(stub, method)
        return await peer_call(
            rpc(request, timeout=call_timeout(), wait_for_ready=place is None), RUNTIME
        )

    def _learn(self, owner: str) -> None:
        if owner not in self._owners:
            self._owners.add(owner)
            self.learned.set()

    async def replicas(self) -> set[str]:
        """The addresses to follow live text from: the target resolved
        (the last good answer when resolving fails) and every learned owner."""
        try:
            before, self.resolved = self.resolved, set(await resolve_replicas(self.target))
        except OSError as error:
            log.warning("cannot resolve the runtime replicas at %s: %s", self.target, error)
        else:
            for address in before - self.resolved:
                self._close_if_unused(address)
        return self.resolved | self._owners

    def lost(self, address: str) -> None:
        """The replica's live stream broke: it may be gone, so its sessions
        are asked of the target again (which knows who took them over), and
        an owner learned from a call is followed again only once a call is
        sent to it."""
        self._owners.discard(address)
        for session_id in [s for s, place in self._places.items() if place == address]:
            del self._places[session_id]
        self._close_if_unused(address)

    def _close_if_unused(self, address: str) -> None:
        """Close the channel to a replica nothing leads to any more (not the
        target, not resolved, no learned owner); a call sent there later
        dials it afresh."""
        if address == self.target or address in self.resolved or address in self._owners:
            return
        self._stubs.pop(address, None)
        channel = self._channels.pop(address, None)
        if channel is not None:
            spawn(channel.close(), name=f"close-runtime-{address}")

    async def close(self) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        self._stubs.clear()
        await asyncio.gather(*(channel.close() for channel in channels))


def _is_address(owner: str) -> bool:
    """Owner ids of replicas that listen are host:port; a runtime used
    in-process has none to send calls to."""
    host, _, port = owner.rpartition(":")
    return bool(host) and port.isdigit()
