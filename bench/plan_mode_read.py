"""A PlanMode read through the gateway against a bare gRPC echo call.

Target (issue 5): within 2x. Both servers run in this process on loopback,
each call through its own channel, so the ratio measures what the gateway
adds to a round trip: auth, validation, the account check and the answer
from the plan cache the gateway keeps current from events."""

from __future__ import annotations

import tempfile
from pathlib import Path

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc

from bench.ratio import Ratio, interleaved
from clients.sdk.auth import authorized_channel
from services.agentruntime.models.builtin import BuiltinAdapter
from services.embedded import EmbeddedStack

TARGET = 2.0
ECHO_METHOD = "/bench.Echo/Echo"


def _echo_handler() -> grpc.GenericRpcHandler:
    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    handler = grpc.unary_unary_rpc_method_handler(echo)
    return grpc.method_handlers_generic_handler("bench.Echo", {"Echo": handler})


async def run() -> Ratio:
    with tempfile.TemporaryDirectory() as tmp:
        stack = EmbeddedStack(Path(tmp), port_override=0, model=BuiltinAdapter())
        await stack.start()
        echo_server = grpc.aio.server()
        echo_server.add_generic_rpc_handlers([_echo_handler()])
        echo_port = echo_server.add_insecure_port("127.0.0.1:0")
        await echo_server.start()
        gateway_channel = authorized_channel(stack.addresses["gateway"], stack.token())
        echo_channel = grpc.aio.insecure_channel(f"127.0.0.1:{echo_port}")
        try:
            gateway = gw_grpc.GatewayServiceStub(gateway_channel)
            session = await gateway.CreateSession(gw.CreateSessionRequest(cwd=tmp))
            request = gw.PlanModeRequest(session_id=session.session.id)
            payload = request.SerializeToString()
            echo = echo_channel.unary_unary(ECHO_METHOD)
            measured, baseline = await interleaved(
                lambda: gateway.PlanMode(request), lambda: echo(payload)
            )
        finally:
            await gateway_channel.close()
            await echo_channel.close()
            await echo_server.stop(None)
            await stack.stop()
    return Ratio("PlanMode read vs bare echo", measured, baseline, TARGET)
