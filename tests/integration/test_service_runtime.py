"""The shared service runtime: the caller's deadline reaches the calls a
service makes on its behalf; requests that do not decode get typed answers;
the rpc log records the status code each call ended with."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path

import grpc
import pytest
from agenthost.sessionlog.v1 import session_log_pb2 as sl
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import MethodDescriptor

from services.agentruntime.models.builtin import BuiltinAdapter
from services.common.client import call_timeout, open_channel
from services.common.errors import SessionNotFound
from services.common.interceptors import refused_lines
from services.common.server import ServiceDefinition
from services.common.status import field_violations
from services.embedded import EmbeddedStack
from tests.support.hosts import running_host
from tests.support.rpc import reason_of

INVALID = grpc.StatusCode.INVALID_ARGUMENT
Metadata = tuple[tuple[str, str], ...]

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


# -- requests that do not decode -----------------------------------------------------

# Broken at the wire level, so no request message of any method decodes them:
# an overlong varint, a field longer than the bytes left, wire type 7.
CORRUPT = (b"\xff" * 11, b"\x0a\x05ab", b"\x0f")
HEALTH = "grpc.health.v1.Health"
REFLECTION = ("grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection")


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[EmbeddedStack]:
    embedded = EmbeddedStack(tmp_path, port_override=0, model=BuiltinAdapter())
    await embedded.start()
    try:
        yield embedded
    finally:
        await embedded.stop()


def _methods(service_names: Iterable[str]) -> Iterator[MethodDescriptor]:
    pool = descriptor_pool.Default()
    for name in service_names:
        yield from pool.FindServiceByName(name).methods


def _path(method: MethodDescriptor) -> str:
    return f"/{method.containing_service.full_name}/{method.name}"


async def _call_with_bytes(
    channel: grpc.aio.Channel, method: MethodDescriptor, payload: bytes, metadata: Metadata
) -> grpc.aio.AioRpcError:
    """Send `payload` as the request of `method`; the error it answers."""
    path = _path(method)
    try:
        if method.client_streaming:
            stream = channel.stream_stream(path)(iter([payload]), metadata=metadata, timeout=10)
            async for _ in stream:
                pass
        elif method.server_streaming:
            async for _ in channel.unary_stream(path)(payload, metadata=metadata, timeout=10):
                pass
        else:
            await channel.unary_unary(path)(payload, metadata=metadata, timeout=10)
    except grpc.aio.AioRpcError as error:
        return error
    raise AssertionError(f"{path} accepted bytes that do not decode")


async def test_bytes_that_do_not_decode_answer_invalid_argument_on_every_method(
    stack: EmbeddedStack, caplog: pytest.LogCaptureFixture
) -> None:
    """Every method of every service (health and reflection too), each bad
    payload twice: INVALID_ARGUMENT with a BadRequest, never grpc's UNKNOWN;
    one warning per method (identical lines are rate-limited), no traceback."""
    refused_lines.clear()
    bearer: Metadata = (("authorization", f"Bearer {stack.token()}"),)
    called: list[str] = []
    with caplog.at_level(logging.INFO):
        for name in stack.addresses:
            channel = stack.channel(name)
            try:
                names = [*stack.definitions[name].service_names, HEALTH, *REFLECTION]
                for method in _methods(names):
                    called.append(_path(method))
                    for payload in [*CORRUPT, *CORRUPT]:
                        error = await _call_with_bytes(channel, method, payload, bearer)
                        assert error.code() == INVALID, (method.full_name, error.details())
                        assert reason_of(error) == "INVALID_REQUEST"
                        assert field_violations(error), "no google.rpc.BadRequest"
            finally:
                await channel.close()
    assert len(called) > 40
    refused = [r for r in caplog.records if r.getMessage() == "undecodable request"]
    # One line per method: every service in this process shares health's.
    logged = [r.__dict__["method"] for r in refused]
    assert sorted(logged) == sorted(set(called))
    assert all(r.levelno == logging.WARNING and not r.exc_info for r in refused)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # A refused request is that one warning, not an rpc line besides.
    assert not [
        r
        for r in caplog.records
        if getattr(r, "code", "") == "INVALID_ARGUMENT" and r.getMessage() == "rpc"
    ]


async def test_the_gateway_answers_unauthenticated_before_looking_at_the_bytes(
    stack: EmbeddedStack,
) -> None:
    channel = open_channel(stack.addresses["gateway"])
    try:
        for method in _methods(stack.definitions["gateway"].service_names):
            for payload in CORRUPT:
                error = await _call_with_bytes(channel, method, payload, ())
                assert error.code() == grpc.StatusCode.UNAUTHENTICATED, method.full_name
                assert reason_of(error) == "UNAUTHENTICATED"
    finally:
        await channel.close()


# -- the rpc log --------------------------------------------------------------------


def _outcomes_definition() -> ServiceDefinition:
    async def ok(request: sl.GetSessionRequest, context: grpc.aio.ServicerContext) -> bytes:
        return b""

    async def missing(request: sl.GetSessionRequest, context: grpc.aio.ServicerContext) -> bytes:
        raise SessionNotFound(request.session_id)

    async def broken(request: sl.GetSessionRequest, context: grpc.aio.ServicerContext) -> bytes:
        raise RuntimeError("a bug")

    async def refuses(request: sl.GetSessionRequest, context: grpc.aio.ServicerContext) -> bytes:
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, "no")
        return b""

    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            behavior, request_deserializer=sl.GetSessionRequest.FromString
        )
        for name, behavior in {
            "Ok": ok,
            "Missing": missing,
            "Broken": broken,
            "Refuses": refuses,
        }.items()
    }
    generic = grpc.method_handlers_generic_handler("test.Outcomes", handlers)

    def register(server: grpc.aio.Server) -> None:
        server.add_generic_rpc_handlers([generic])

    return ServiceDefinition(["test.Outcomes"], register)


async def test_the_rpc_log_records_the_status_code_each_call_ended_with(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    valid = sl.GetSessionRequest(session_id="s1").SerializeToString()
    invalid = sl.GetSessionRequest(session_id="").SerializeToString()  # breaks its rules
    calls = [("Ok", valid), ("Missing", valid), ("Broken", valid), ("Refuses", valid)]
    calls.append(("Ok", invalid))
    # The host's stop waits for every call to end, logged: a caller can have
    # its answer before the server's side of the call has written its line.
    with caplog.at_level(logging.INFO, logger="agenthost.rpc"):
        async with running_host("outcomes", _outcomes_definition(), tmp_path) as (_, channel):
            answered = []
            for name, payload in calls:
                try:
                    await channel.unary_unary(f"/test.Outcomes/{name}")(payload, timeout=10)
                    answered.append("OK")
                except grpc.aio.AioRpcError as error:
                    answered.append(error.code().name)
    logged = [r.__dict__["code"] for r in caplog.records if r.getMessage() == "rpc"]
    assert answered == ["OK", "NOT_FOUND", "UNKNOWN", "PERMISSION_DENIED", "INVALID_ARGUMENT"]
    assert sorted(logged) == sorted(answered)
