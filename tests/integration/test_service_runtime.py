"""The shared service runtime: the caller's deadline reaches the calls a
service makes on its behalf."""

from __future__ import annotations

from pathlib import Path

import grpc

from services.common.client import call_timeout
from services.common.server import ServiceDefinition
from tests.support.hosts import running_host

METHOD = "/test.Deadline/Remaining"


def _remaining_definition() -> ServiceDefinition:
    async def remaining(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        # What a downstream call made now would be given as its timeout.
        return repr(call_timeout(30.0)).encode()

    handler = grpc.method_handlers_generic_handler(
        "test.Deadline", {"Remaining": grpc.unary_unary_rpc_method_handler(remaining)}
    )

    def register(server: grpc.aio.Server) -> None:
        server.add_generic_rpc_handlers([handler])

    return ServiceDefinition(["test.Deadline"], register)


async def test_downstream_calls_get_at_most_the_callers_remaining_time(tmp_path: Path) -> None:
    async with running_host("deadline", _remaining_definition(), tmp_path) as (_, channel):
        call = channel.unary_unary(METHOD)
        # gRPC rounds a timeout up on the wire (10 s arrives as 10.1 s): what
        # a service passes on must still fit in what its caller has.
        for timeout in (0.5, 2.0, 10.0, 20.0):
            for _ in range(5):
                bounded = float(await call(b"", timeout=timeout))
                assert 0 < bounded <= timeout
        unbounded = float(await call(b""))
    assert unbounded == 30.0
