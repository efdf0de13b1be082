"""What the model sees of a long or interrupted conversation: cancelled
turns leave a marker, oversized tool output is spilled to a file, and a
compacted session's view is rebuilt from its last compaction."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime import view as view_module
from services.agentruntime.compaction import SUMMARY_HEADING
from services.agentruntime.models.base import ToolResultMessage, UserMessage
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply, ScriptedToolCall
from services.agentruntime.runtime import AgentRuntime
from services.agentruntime.spill import spill_path
from services.agentruntime.tests.test_turns import WAIT_S, idle, next_question
from services.agentruntime.transcript import CANCELLED_MARK, NOT_RUN
from services.agentruntime.workspace_tools import WorkspaceFiles
from services.sessionlog.domain import SessionLog
from services.sessionlog.port import Direction, ReadResult
from tests.support.events import kinds


async def test_a_cancelled_turn_shows_the_model_its_partial_answer_and_the_cancel(
    session_log: SessionLog, session: str
) -> None:
    model = BuiltinAdapter()
    reply = model.enqueue(ScriptedReply(text="I will start by", hold=True))
    runtime = AgentRuntime(session_log, model)
    await runtime.prompt(session, "refactor the parser")
    await asyncio.wait_for(reply.started.wait(), WAIT_S)
    await runtime.cancel(session)
    await runtime.prompt(session, "no, fix the lexer instead")
    await idle(runtime, session)
    seen = model.requests[-1].messages
    assert [type(m).__name__ for m in seen] == ["UserMessage", "AssistantMessage", "UserMessage"]
    assert getattr(seen[1], "text", "") == f"I will start by\n\n{CANCELLED_MARK}"


async def test_a_turn_cancelled_before_any_text_still_leaves_the_marker(
    session_log: SessionLog, session: str
) -> None:
    model = BuiltinAdapter()
    reply = model.enqueue(ScriptedReply(hold=True))
    runtime = AgentRuntime(session_log, model)
    await runtime.prompt(session, "first")
    await asyncio.wait_for(reply.started.wait(), WAIT_S)
    await runtime.cancel(session)
    await runtime.prompt(session, "second")
    await idle(runtime, session)
    texts = [getattr(m, "text", "") for m in model.requests[-1].messages]
    assert texts == ["first", CANCELLED_MARK, "second"]


async def test_oversized_tool_output_is_spilled_to_a_file_the_model_can_page_through(
    session_log: SessionLog, session: str, tmp_path: Path
) -> None:
    lines = [f"row {n:05d} " + "y" * 40 for n in range(2000)]
    (tmp_path / "huge.log").write_text("\n".join(lines))
    model = BuiltinAdapter(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("read_file", {"path": "huge.log"}, "c1")]),
            ScriptedReply(text="I see the head and the tail."),
        ]
    )
    runtime = AgentRuntime(session_log, model)
    await runtime.prompt(session, "read huge.log")
    await idle(runtime, session)
    events = (await session_log.read(session, limit=100)).events
    logged = next(e.tool_result for e in events if e.HasField("tool_result"))
    assert "row 01999" in logged.output and len(logged.output) > 100_000  # the log keeps it all
    shown = model.requests[1].messages[-1]
    assert isinstance(shown, ToolResultMessage)
    assert len(shown.content.encode()) < 17_000
    assert "row 00000" in shown.content and "row 01999" in shown.content
    assert "row 01000" not in shown.content
    assert spill_path("c1") in shown.content and "read_file" in shown.content
    # The file holds the whole output, and read_file pages through it; git
    # and grep leave the folder alone.
    assert (tmp_path / spill_path("c1")).read_text() == logged.output
    assert (tmp_path / spill_path("c1")).parent.joinpath(".gitignore").read_text().endswith("*\n")
    model.enqueue(
        ScriptedReply(
            tool_calls=[
                ScriptedToolCall(
                    "read_file", {"path": spill_path("c1"), "offset": 1000, "limit": 3}, "c2"
                )
            ]
        )
    )
    await runtime.prompt(session, "read the middle")
    await idle(runtime, session)
    page = model.requests[-1].messages[-1]
    assert isinstance(page, ToolResultMessage) and page.ok
    assert "row 00999" in page.content or "row 01000" in page.content
    # grep finds the row in the workspace's file, not in the spilled copy.
    found = await WorkspaceFiles(tmp_path).grep("row 01999")
    assert "huge.log" in found.output and ".agenthost" not in found.output


class CountedReads:
    """The session log, noting where each read starts."""

    def __init__(self, log: SessionLog) -> None:
        self._log = log
        self.starts: list[int | None] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._log, name)

    async def read(
        self,
        session_id: str,
        *,
        from_seq: int | None = None,
        direction: Direction = Direction.FORWARD,
        limit: int = 1000,
    ) -> ReadResult:
        self.starts.append(from_seq)
        return await self._log.read(session_id, from_seq=from_seq, direction=direction, limit=limit)


async def test_a_restarted_runtime_builds_the_view_from_the_last_compaction(
    session_log: SessionLog, session: str
) -> None:
    model = BuiltinAdapter()
    runtime = AgentRuntime(session_log, model)
    for n in range(5):
        await runtime.prompt(session, f"question {n}")
        await idle(runtime, session)
    model.enqueue(ScriptedReply(text="Five questions were asked."))
    outcome = await runtime.execute_command(session, "compact", "questions")
    assert outcome.ok
    compaction = next(
        e for e in (await session_log.read(session, limit=1000)).events if e.HasField("compaction")
    )
    await runtime.close()

    counted = CountedReads(session_log)
    fresh_model = BuiltinAdapter()
    restarted = AgentRuntime(counted, fresh_model)  # type: ignore[arg-type]
    await restarted.prompt(session, "question 5")
    await idle(restarted, session)
    seen = fresh_model.requests[0].messages
    assert seen[0] == UserMessage(f"{SUMMARY_HEADING}\n\nFive questions were asked.")
    assert [getattr(m, "text", "") for m in seen[1:]] == ["question 5"]
    # Nothing was read from the log's start: the fold came from the
    # checkpointed state, the view from the compaction on.
    assert all(start is not None and start > 0 for start in counted.starts)
    assert min(s for s in counted.starts if s is not None) >= compaction.compaction.up_to_seq
    await restarted.close()


@pytest.mark.parametrize("read_batch", [1, 2, 3, 4, 5, 7])
async def test_a_restarted_runtime_sees_the_whole_conversation_whatever_its_reads_hold(
    session_log: SessionLog, session: str, read_batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The view is read in batches up to the folded end; a batch that ends
    at that end, or beside it, loses nothing."""
    model = BuiltinAdapter()
    runtime = AgentRuntime(session_log, model)
    for n in range(3):
        await runtime.prompt(session, f"question {n}")
        await idle(runtime, session)
    events = (await session_log.read(session, limit=1000)).events
    answers = [e.assistant_message.text for e in events if e.HasField("assistant_message")]
    await runtime.close()

    monkeypatch.setattr(view_module, "READ_BATCH", read_batch)
    fresh_model = BuiltinAdapter()
    restarted = AgentRuntime(session_log, fresh_model)
    await restarted.prompt(session, "question 3")
    await idle(restarted, session)
    seen = [getattr(m, "text", "") for m in fresh_model.requests[0].messages]
    asked = [f"question {n}" for n in range(4)]
    assert seen == [asked[0], answers[0], asked[1], answers[1], asked[2], answers[2], asked[3]]
    await restarted.close()


async def test_compact_while_a_turn_runs_is_refused_and_logged(
    session_log: SessionLog, session: str
) -> None:
    model = BuiltinAdapter()
    reply = model.enqueue(ScriptedReply(text="busy", hold=True))
    runtime = AgentRuntime(session_log, model)
    await runtime.prompt(session, "go")
    await asyncio.wait_for(reply.started.wait(), WAIT_S)
    outcome = await runtime.execute_command(session, "compact", None)
    assert not outcome.ok and "turn is running" in outcome.message
    reply.release()
    await idle(runtime, session)
    events = (await session_log.read(session, limit=100)).events
    assert "compaction" not in kinds(events)
    done = next(e.command_done for e in events if e.HasField("command_done"))
    assert done.kind == ev.COMMAND_DONE_KIND_ERROR


async def test_calls_a_cancelled_turn_never_ran_get_a_result_the_model_can_read(
    session_log: SessionLog, session: str
) -> None:
    model = BuiltinAdapter(
        [
            ScriptedReply(
                text="Let me run it.",
                tool_calls=[ScriptedToolCall("shell", {"command": "ls"}, "c1")],
            )
        ]
    )
    runtime = AgentRuntime(session_log, model)
    await runtime.prompt(session, "list the files")
    await next_question(session_log, session)  # the shell call waits for approval
    await runtime.cancel(session)
    await runtime.prompt(session, "never mind")
    await idle(runtime, session)
    seen = model.requests[-1].messages
    # Every call has its result (providers refuse a call without one).
    assert [type(m).__name__ for m in seen] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
        "UserMessage",
    ]
    assert seen[2] == ToolResultMessage("c1", NOT_RUN, ok=False)
    assert getattr(seen[3], "text", "") == CANCELLED_MARK
