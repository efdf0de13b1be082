"""What clients see from the log alone agrees with the plan-mode service, and
concurrent writers never record a redundant switch."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.planmode.controller import PlanModeController
from services.planmode.errors import PlanModeInactive
from services.planmode.projection_unit import PlanProjectionUnit
from services.planmode.tests.harness import RuntimeDriver, plan_mode_values, read_all
from services.sessionlog.domain import SessionLog, open_session_log

UNIT = PlanProjectionUnit()

# What users, the model and the runtime do to one session, in any order.
ACTIONS = st.lists(
    st.sampled_from(
        [
            "start_turn",
            "end_turn",
            "model_request",
            "/plan",
            "/plan msg",
            "/plan off",
            "/plan off extra",
            "exit_plan_mode",
        ]
    ),
    max_size=15,
)


async def perform(action: str, runtime: RuntimeDriver) -> None:
    controller, session_id = runtime.controller, runtime.session_id
    if action == "start_turn":
        await runtime.start_turn()
    elif action == "end_turn":
        await runtime.end_turn()
    elif action == "model_request":
        await runtime.model_request()
    elif action == "exit_plan_mode":
        with contextlib.suppress(PlanModeInactive):  # the model may try outside plan mode
            await controller.exit_plan_mode(session_id)
    else:
        args = action.removeprefix("/plan").strip() or None
        await controller.run_plan_command(session_id, args, "")


async def projected(log: SessionLog, session_id: str) -> object:
    state = UNIT.init()
    for event in await read_all(log, session_id):
        state = UNIT.apply(state, event)
    return UNIT.view(state)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=ACTIONS)
async def test_the_plan_projection_agrees_with_the_service(
    tmp_path_factory: pytest.TempPathFactory, actions: list[str]
) -> None:
    folder = tmp_path_factory.mktemp(f"agree-{uuid.uuid4().hex[:8]}")
    async with open_session_log(folder / "log.db") as log:
        session, _ = await log.create_session(None, "/home/dev/project")
        runtime = RuntimeDriver(log, PlanModeController(log), session.id)
        for action in actions:
            await perform(action, runtime)
            state, _ = await runtime.controller.get(session.id)
            expected = {"active": state.active}
            if state.pending is not None:
                expected["pending"] = state.pending
            assert await projected(log, session.id) == expected, action
        values = await plan_mode_values(log, session.id)
        assert all(a != b for a, b in zip([False, *values], values, strict=False))


async def test_replicas_sharing_a_log_never_record_a_redundant_switch(
    log: SessionLog, session_id: str
) -> None:
    first = PlanModeController(log)
    second = PlanModeController(log)
    for round_ in range(10):
        wanted = round_ % 2 == 0
        await asyncio.gather(first.set(session_id, wanted), second.set(session_id, wanted))
    values = await plan_mode_values(log, session_id)
    assert values == [True, False] * 5
    assert await first.get(session_id) == await second.get(session_id)
