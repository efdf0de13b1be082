"""How a peer's address names its replicas, and how a replica names itself."""

from __future__ import annotations

import socket

import pytest

from services.common.topology import reachable_address, resolve_replicas, target_entries


@pytest.mark.parametrize(
    ("target", "entries"),
    [
        ("agentruntime:7100", ["agentruntime:7100"]),
        ("dns:///agentruntime:7100", ["agentruntime:7100"]),
        ("ipv4:127.0.0.1:1,127.0.0.1:2", ["127.0.0.1:1", "127.0.0.1:2"]),
        ("127.0.0.1:1, 127.0.0.1:2,", ["127.0.0.1:1", "127.0.0.1:2"]),
        ("ipv6:[::1]:7100", ["[::1]:7100"]),
    ],
)
def test_a_target_lists_its_entries(target: str, entries: list[str]) -> None:
    assert target_entries(target) == entries


async def test_addresses_are_replicas_as_given_and_names_resolve_to_each_address() -> None:
    assert await resolve_replicas("ipv4:127.0.0.1:1,127.0.0.1:2,127.0.0.1:1") == [
        "127.0.0.1:1",
        "127.0.0.1:2",
    ]
    assert await resolve_replicas("[::1]:7") == ["[::1]:7"]
    # localhost is one replica (IPv4 first), not one per address family.
    assert await resolve_replicas("localhost:7100") == ["127.0.0.1:7100"]


async def test_a_name_that_does_not_resolve_raises_for_the_caller_to_keep_its_last_answer() -> None:
    with pytest.raises(OSError):
        await resolve_replicas("no-such-host.invalid:7100")


def test_a_replica_listening_everywhere_is_reached_at_its_host() -> None:
    assert reachable_address("127.0.0.1", 7105) == "127.0.0.1:7105"
    assert reachable_address("0.0.0.0", 7100, "runtime-2.internal") == "runtime-2.internal:7100"
    own = socket.gethostbyname(socket.gethostname())
    assert reachable_address("0.0.0.0", 7100) == f"{own}:7100"
    assert reachable_address("[::]", 7100) == f"{own}:7100"
