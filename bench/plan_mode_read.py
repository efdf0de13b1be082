"""Gateway `PlanMode` read, p50, against a bare echo unary call.

The read goes through auth, validation, the account check and the `plan`
projection (the gateway answers from the projection service), so the ratio
is what all that adds to a loopback round trip."""

from __future__ import annotations

from pathlib import Path

from agenthost.gateway.v1 import gateway_pb2 as gw

from bench.harness import CALL_TIMEOUT_S, Sizes, against_echo, gateway_session, running_stack
from bench.ratio import Figure, Target, latency_side

NAME = "plan_mode_read"


async def run(sizes: Sizes, data_dir: Path) -> Figure:
    async with running_stack(data_dir) as stack:
        request = gw.PlanModeRequest(session_id=await gateway_session(stack))
        measured, baseline = await against_echo(
            lambda: stack.gateway.PlanMode(request, timeout=CALL_TIMEOUT_S),
            request.SerializeToString(),
            sizes,
        )
    return Figure(
        name="gateway PlanMode read",
        compared="p50",
        unit="ms",
        measured=latency_side("PlanMode (idle session)", measured, "p50"),
        baseline=latency_side("bare grpc.aio echo unary", baseline, "p50"),
        target=Target("<=", 1.5),
    )
