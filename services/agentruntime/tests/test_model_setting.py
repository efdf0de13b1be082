"""The session's model: a logged setting the runtime reads at each model
request, validated against the configured models."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply, ScriptedToolCall
from services.agentruntime.models.catalog import ModelCatalog, spec_of_adapter
from services.agentruntime.runtime import AgentRuntime
from services.agentruntime.tests.test_turns import WAIT_S, idle
from services.common.errors import UnknownModel
from services.sessionlog.domain import SessionLog


def two_models() -> tuple[ModelCatalog, BuiltinAdapter, BuiltinAdapter]:
    first, second = BuiltinAdapter(model="first-id"), BuiltinAdapter(model="second-id")
    specs = [spec_of_adapter(first, "first"), spec_of_adapter(second, "second")]
    return ModelCatalog(specs, adapters={"first": first, "second": second}), first, second


async def headers(log: SessionLog, session_id: str) -> list[str]:
    events = (await log.read(session_id, limit=1000)).events
    return [e.request_header.model for e in events if e.HasField("request_header")]


async def test_the_next_request_goes_to_the_model_the_session_switched_to(
    session_log: SessionLog, session: str
) -> None:
    catalog, first, second = two_models()
    runtime = AgentRuntime(session_log, catalog)
    await runtime.prompt(session, "one")
    await idle(runtime, session)
    settings, _ = await runtime.update_settings(session, None, None, "second")
    assert settings.model == "second"
    await runtime.prompt(session, "two")
    await idle(runtime, session)
    assert await headers(session_log, session) == ["first-id", "second-id"]
    assert [len(first.requests), len(second.requests)] == [1, 1]
    # Recorded: whatever folds the log (a restarted runtime, a projection) knows it.
    events = (await session_log.read(session, limit=1000)).events
    recorded = [e.session_settings.model for e in events if e.HasField("session_settings")]
    assert recorded == ["second"]
    await runtime.close()


async def test_an_unknown_model_is_refused_and_nothing_is_recorded(
    session_log: SessionLog, session: str
) -> None:
    catalog, _, _ = two_models()
    runtime = AgentRuntime(session_log, catalog)
    before = (await session_log.get_session(session)).last_seq
    with pytest.raises(UnknownModel) as refused:
        await runtime.update_settings(session, None, None, "gpt-9")
    assert refused.value.reason == "UNKNOWN_MODEL"
    assert refused.value.metadata["known"] == "first,second"
    assert (await session_log.get_session(session)).last_seq == before
    await runtime.close()


async def test_a_switch_during_a_turn_applies_at_the_next_step(
    session_log: SessionLog, session: str, tmp_path: Path
) -> None:
    catalog, first, _second = two_models()
    (tmp_path / "notes.txt").write_text("hello")
    read = ScriptedToolCall("read_file", {"path": "notes.txt"})
    held = first.enqueue(ScriptedReply(tool_calls=[read], hold=True))
    runtime = AgentRuntime(session_log, catalog)
    await runtime.prompt(session, "read my notes")
    await asyncio.wait_for(held.started.wait(), WAIT_S)
    await runtime.update_settings(session, None, None, "second")
    held.release()
    await idle(runtime, session)
    # The step under way kept its model; the step after the tool call switched.
    assert await headers(session_log, session) == ["first-id", "second-id"]
    await runtime.close()


async def test_the_empty_name_goes_back_to_the_default(
    session_log: SessionLog, session: str
) -> None:
    catalog, _first, _second = two_models()
    runtime = AgentRuntime(session_log, catalog)
    await runtime.update_settings(session, None, None, "second")
    settings, _ = await runtime.update_settings(session, None, None, "")
    assert settings.model == ""
    await runtime.prompt(session, "hi")
    await idle(runtime, session)
    assert await headers(session_log, session) == ["first-id"]
    await runtime.close()
