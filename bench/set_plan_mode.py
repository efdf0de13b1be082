"""Gateway `SetPlanMode` on an idle session, p50, against a bare echo.

Every call flips the mode, so each one commits a `plan/mode` event: a
durable (fsynced) append to the session log behind the fence, decided by
plan mode."""

from __future__ import annotations

from pathlib import Path

from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.planmode.v1 import plan_mode_pb2 as pm

from bench.harness import (
    CALL_TIMEOUT_S,
    IN_PROCESS,
    Fences,
    Sizes,
    Stack,
    against_echo,
    gateway_session,
    running_stack,
)
from bench.ratio import Call, Figure, Target, latency_side

NAME = "set_plan_mode"


def toggle(stack: Stack, session_id: str) -> Call:
    fences, state = Fences(), {"active": False}

    async def call() -> None:
        state["active"] = not state["active"]
        request = gw.SetPlanModeRequest(
            fence=fences.next(), session_id=session_id, active=state["active"]
        )
        reply = await stack.gateway.SetPlanMode(request, timeout=CALL_TIMEOUT_S)
        # Anything else would measure a path that writes nothing.
        if reply.outcome != pm.SET_OUTCOME_COMMITTED:
            raise RuntimeError(f"SetPlanMode answered {pm.SetOutcome.Name(reply.outcome)}")

    return call


async def run(sizes: Sizes, data_dir: Path) -> Figure:
    async with running_stack(data_dir) as stack:
        session_id = await gateway_session(stack)
        payload = gw.SetPlanModeRequest(
            fence=Fences().next(), session_id=session_id, active=True
        ).SerializeToString()
        measured, baseline = await against_echo(toggle(stack, session_id), payload, sizes)
    return Figure(
        name="gateway SetPlanMode idle commit (durable)",
        compared="p50",
        unit="ms",
        measured=latency_side("SetPlanMode, each call commits plan/mode", measured, "p50"),
        baseline=latency_side("bare grpc.aio echo unary", baseline, "p50"),
        target=Target("<=", 4.5),
        notes=(IN_PROCESS,),
    )
