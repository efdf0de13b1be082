"""Subagents through the real runtime over the local OpenAI-compatible
provider: `task` calls start child sessions that run at once, answer as tool
results, roll their usage up, stop with their parent, inherit its limits,
and take agent files written for Claude Code unchanged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.capabilities.subagents import SECTION_ID
from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    StreamItem,
    finish_chunk,
    text_chunk,
    tool_fragment,
    usage_chunk,
)
from services.sessionlog.usage import UsageFold, fold_usage
from tests.support.stack import Stack, running_stack

SID = "parent"
WAIT_S = 20.0
REVIEWER = """---
name: reviewer
description: Reviews code for bugs and says what it found.
tools: Read, Grep
model: sonnet
---
You are a careful code reviewer. Read the code and list the bugs you find.
"""


def adapter(provider: FakeProvider) -> OpenAICompatAdapter:
    return OpenAICompatAdapter(
        OpenAICompatConfig(
            base_url=provider.url,
            model="fake",
            max_attempts=1,
            first_byte_timeout_s=30.0,
            idle_timeout_s=30.0,
            context_window=64000,
        )
    )


def text(words: str, *before: StreamItem, prompt: int = 100) -> ProviderReply:
    return ProviderReply(
        stream=[*before, text_chunk(words), finish_chunk("stop"), usage_chunk(prompt, 10), DONE]
    )


def calls(*made: tuple[str, dict[str, Any]]) -> ProviderReply:
    fragments = [
        tool_fragment(n, call_id=f"call-{n}", name=name, arguments=json.dumps(args))
        for n, (name, args) in enumerate(made)
    ]
    return ProviderReply(stream=[*fragments, finish_chunk("tool_calls"), usage_chunk(50, 5), DONE])


def task(description: str, prompt: str, kind: str = "general") -> tuple[str, dict[str, Any]]:
    return "task", {"description": description, "prompt": prompt, "subagent_type": kind}


def system(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


def last_user(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m["role"] in ("user", "tool")]
    return str(users[-1].get("content") or "")


def is_child(body: dict[str, Any]) -> bool:
    return "You are a subagent" in system(body) or "code reviewer" in system(body)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "app.py").write_text("def add(a, b):\n    return a - b\n")
    return folder


@pytest.fixture
async def stack(tmp_path: Path, provider: FakeProvider, project: Path) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path / "data", model=adapter(provider)) as running:
        await running.log.create_session(SID, str(project))
        await running.runtime.UpdateSettings(
            rt.UpdateSettingsRequest(session_id=SID, approvals=ev.APPROVAL_POLICY_NEVER)
        )
        yield running


async def events_of(stack: Stack, session_id: str) -> list[ev.Event]:
    return list((await stack.log.read(session_id, limit=1000)).events)


async def children_of(stack: Stack) -> list[str]:
    return [
        e.subagent_started.child_session_id
        for e in await events_of(stack, SID)
        if e.HasField("subagent_started")
    ]


async def prompt(stack: Stack, words: str) -> None:
    await stack.runtime.Prompt(rt.PromptRequest(session_id=SID, text=words))


def responder(
    parent: list[ProviderReply], child: Callable[[dict[str, Any]], ProviderReply]
) -> Callable[[dict[str, Any]], ProviderReply]:
    """The parent's replies in order; each child request answered by `child`."""

    def answer(body: dict[str, Any]) -> ProviderReply:
        return child(body) if is_child(body) else parent.pop(0)

    return answer


async def test_two_children_run_at_once_and_answer_as_tool_results(
    stack: Stack, provider: FakeProvider
) -> None:
    both_asked = asyncio.Event()
    asked: list[str] = []

    def child(body: dict[str, Any]) -> ProviderReply:
        # Each child's answer waits until both children have asked: children
        # run one after another would wait for ever.
        asked.append(last_user(body))
        if len(asked) == 2:
            both_asked.set()
        looked_for = last_user(body).rsplit("\n", 1)[-1]
        return text(f"found it for: {looked_for}", both_asked, prompt=300)

    provider.responder = responder(
        [calls(task("find A", "look for A"), task("find B", "look for B")), text("both done")],
        child,
    )
    await prompt(stack, "find A and B")
    async with asyncio.timeout(WAIT_S):
        await stack.wait_idle(SID)
    events = await events_of(stack, SID)
    results = {e.tool_result.call_id: e.tool_result for e in events if e.HasField("tool_result")}
    assert results["call-0"].ok and "found it for: look for A" in results["call-0"].output
    assert results["call-1"].ok and "found it for: look for B" in results["call-1"].output
    assert events[-1].turn_end.reason == ev.TURN_END_REASON_COMPLETED
    # The parent's usage holds its own two requests and one of each child.
    usage = UsageFold()
    for event in events:
        usage = fold_usage(usage, event)
    assert usage.requests == 4 and usage.prompt_tokens == 50 + 100 + 300 + 300
    # Each child is a session whose header names its parent and the call.
    headers = []
    for child_id in await children_of(stack):
        first = (await events_of(stack, child_id))[0]
        headers.append(
            (first.subagent_header.parent_session_id, first.subagent_header.parent_call_id)
        )
    assert sorted(headers) == [(SID, "call-0"), (SID, "call-1")]


async def test_cancelling_the_parent_stops_its_children(
    stack: Stack, provider: FakeProvider
) -> None:
    stalled = asyncio.Event()  # never set: the children never answer
    both_asked = asyncio.Event()
    asked: list[str] = []

    def child(body: dict[str, Any]) -> ProviderReply:
        asked.append(last_user(body))
        if len(asked) == 2:
            both_asked.set()
        return text("never", stalled)

    provider.responder = responder(
        [calls(task("find A", "look for A"), task("find B", "look for B"))], child
    )
    await prompt(stack, "find A and B")
    await asyncio.wait_for(both_asked.wait(), WAIT_S)
    await stack.runtime.Cancel(rt.CancelRequest(session_id=SID))
    await stack.wait_idle(SID)
    for child_id in await children_of(stack):
        await stack.wait_idle(child_id)
        ends = [e.turn_end for e in await events_of(stack, child_id) if e.HasField("turn_end")]
        assert [e.reason for e in ends] == [ev.TURN_END_REASON_CANCELLED]
    parent_ends = [e for e in await events_of(stack, SID) if e.HasField("turn_end")]
    assert parent_ends[-1].turn_end.reason == ev.TURN_END_REASON_CANCELLED


async def test_a_childs_approval_is_asked_and_answered_in_the_parent(
    stack: Stack, provider: FakeProvider, project: Path
) -> None:
    await stack.runtime.UpdateSettings(
        rt.UpdateSettingsRequest(session_id=SID, approvals=ev.APPROVAL_POLICY_ASK)
    )
    writes = [calls(("write_file", {"path": "new.py", "content": "x = 1\n"})), text("wrote it")]
    provider.responder = responder(
        [calls(task("write", "write new.py")), text("ok")], lambda body: writes.pop(0)
    )
    await prompt(stack, "have a subagent write a file")
    question = await stack.next_question(SID)
    (child_id,) = await children_of(stack)
    assert question.child_session_id == child_id and child_id in question.title
    assert question.approval is not None and "new.py" in question.approval.summary
    await stack.runtime.AnswerQuestion(
        rt.AnswerQuestionRequest(
            session_id=SID,
            question_id=question.question_id,
            answer=ev.QuestionAnswer(allow_once=True),
        )
    )
    await stack.wait_idle(SID)
    assert (project / "new.py").read_text() == "x = 1\n"
    parent = await events_of(stack, SID)
    answered = [e for e in parent if e.HasField("question_answered")]
    assert [a.question_answered.question_id for a in answered] == [question.question_id]
    child = await events_of(stack, child_id)
    assert sum(e.HasField("question_answered") for e in child) == 1


async def test_subagents_go_only_so_deep(stack: Stack, provider: FakeProvider) -> None:
    nested = [calls(task("deeper", "go deeper")), text("tried")]
    deepest = [calls(task("deepest", "go deepest")), text("could not")]

    def child(body: dict[str, Any]) -> ProviderReply:
        return nested.pop(0) if "go deeper" not in json.dumps(body["messages"]) else deepest.pop(0)

    provider.responder = responder([calls(task("one", "go deep")), text("done")], child)
    await prompt(stack, "nest")
    await stack.wait_idle(SID)
    (child_id,) = await children_of(stack)
    (grandchild_id,) = [
        e.subagent_started.child_session_id
        for e in await events_of(stack, child_id)
        if e.HasField("subagent_started")
    ]
    await stack.wait_idle(grandchild_id)
    refused = [
        e.tool_result for e in await events_of(stack, grandchild_id) if e.HasField("tool_result")
    ]
    assert len(refused) == 1 and not refused[0].ok and "deeper than 2" in refused[0].error


async def test_a_child_of_a_plan_mode_parent_cannot_write(
    stack: Stack, provider: FakeProvider, project: Path
) -> None:
    await stack.plan.SetPlanMode(pm.SetPlanModeRequest(session_id=SID, active=True))
    writes = [calls(("write_file", {"path": "new.py", "content": "x = 1\n"})), text("tried")]
    provider.responder = responder(
        [calls(task("write", "write new.py")), text("ok")], lambda body: writes.pop(0)
    )
    await prompt(stack, "have a subagent write a file")
    await stack.wait_idle(SID)
    (child_id,) = await children_of(stack)
    await stack.wait_idle(child_id)
    child_events = await events_of(stack, child_id)
    (result,) = [e.tool_result for e in child_events if e.HasField("tool_result")]
    assert not result.ok and "read-only" in result.error
    assert not (project / "new.py").exists()


async def test_an_agent_file_written_for_claude_code_works_unchanged(
    stack: Stack, provider: FakeProvider, project: Path
) -> None:
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "reviewer.md").write_text(REVIEWER)
    seen: list[dict[str, Any]] = []

    def child(body: dict[str, Any]) -> ProviderReply:
        seen.append(body)
        return text("add subtracts: a bug")

    provider.responder = responder(
        [calls(task("review", "review app.py", "reviewer")), text("reviewed")], child
    )
    await prompt(stack, "review the code")
    await stack.wait_idle(SID)
    (body,) = seen
    assert "You are a careful code reviewer." in system(body)
    assert sorted(t["function"]["name"] for t in body["tools"]) == ["grep", "read_file"]
    results = [e.tool_result for e in await events_of(stack, SID) if e.HasField("tool_result")]
    assert results[-1].ok and "add subtracts" in results[-1].output
    # The parent's model was told which agents there are.
    parent_first = provider.requests[0].body
    assert "reviewer: Reviews code for bugs" in json.dumps(parent_first["messages"])
    assert SECTION_ID not in system(parent_first) and "code reviewer" not in system(parent_first)


async def test_a_follow_up_goes_to_the_same_child(stack: Stack, provider: FakeProvider) -> None:
    answers = [text("first answer"), text("second answer")]
    provider.responder = responder(
        [calls(task("look", "look once")), text("asked once")], lambda body: answers.pop(0)
    )
    await prompt(stack, "start")
    await stack.wait_idle(SID)
    (child_id,) = await children_of(stack)
    provider.responder = responder(
        [
            calls(("task", {"description": "again", "prompt": "look twice", "child": child_id})),
            text("asked twice"),
        ],
        lambda body: answers.pop(0),
    )
    await prompt(stack, "again")
    await stack.wait_idle(SID)
    assert await children_of(stack) == [child_id, child_id]
    users = [e for e in await events_of(stack, child_id) if e.HasField("user_message")]
    assert [u.user_message.text for u in users] == ["look once", "look twice"]


async def test_a_childs_commands_are_confined_like_its_parents(
    stack: Stack, provider: FakeProvider, tmp_path: Path
) -> None:
    """Real bubblewrap: a child's command cannot read the stack's data (its
    token), cannot reach the network the session has off, and meets the
    process limit."""
    connected = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    token = (tmp_path / "data" / "token").read_text().strip()
    commands = [
        calls(
            ("shell", {"command": f"cat {tmp_path / 'data'}/token; echo end-of-cat"}),
            ("shell", {"command": f"echo hi > /dev/tcp/127.0.0.1/{port} && echo reached"}),
            ("shell", {"command": "bomb() { bomb & bomb & wait; }; bomb", "timeout_s": 3}),
        ),
        text("tried"),
    ]
    provider.responder = responder(
        [calls(task("escape", "try to escape")), text("ok")], lambda body: commands.pop(0)
    )
    try:
        await prompt(stack, "let a subagent try")
        await stack.wait_idle(SID)
        (child_id,) = await children_of(stack)
        await stack.wait_idle(child_id)
    finally:
        server.close()
        await server.wait_closed()
    results = [e.tool_result for e in await events_of(stack, child_id) if e.HasField("tool_result")]
    cat, network, bomb = (r.output or r.error for r in results)
    assert "end-of-cat" in cat and token not in cat
    assert "reached" not in network and not connected.is_set()
    assert "Resource temporarily unavailable" in bomb or "retry" in bomb
