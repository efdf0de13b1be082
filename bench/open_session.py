"""Gateway `OpenSession` of a 100-event session, p50, against a bare echo.

One call is the tail page from the log, the projection block (plan,
questions, settings, status) and the resume check of the agent: what a
client does every time it shows a session."""

from __future__ import annotations

from pathlib import Path

from agenthost.gateway.v1 import gateway_pb2 as gw

from bench.harness import (
    CALL_TIMEOUT_S,
    IN_PROCESS,
    Sizes,
    against_echo,
    gateway_session,
    running_stack,
)
from bench.ratio import Figure, Target, latency_side

NAME = "open_session"


async def run(sizes: Sizes, data_dir: Path) -> Figure:
    async with running_stack(data_dir) as stack:
        request = gw.OpenSessionRequest(
            session_id=await gateway_session(stack, sizes.small_session)
        )
        first = await stack.gateway.OpenSession(request, timeout=CALL_TIMEOUT_S)
        if "plan" not in first.projections:  # the block must be part of what we time
            raise RuntimeError(f"OpenSession came without the plan: {first.projection_error!r}")
        # The gateway reads TailPage, then GetProjection as of its end.
        measured, baseline = await against_echo(
            lambda: stack.gateway.OpenSession(request, timeout=CALL_TIMEOUT_S),
            request.SerializeToString(),
            sizes,
        )
    return Figure(
        name=f"gateway OpenSession, {sizes.small_session}-event session",
        compared="p50",
        unit="ms",
        measured=latency_side(
            f"OpenSession (tail page {len(first.events)} events + block + plan)", measured, "p50"
        ),
        baseline=latency_side("bare grpc.aio echo unary", baseline, "p50"),
        target=Target("<=", 4.5),
        notes=("the echo carries the request's bytes, not the reply's", IN_PROCESS),
    )
