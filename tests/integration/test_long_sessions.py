"""Sessions that outlive the model's context window, against the real
OpenAI-compatible adapter and a local provider with an 8k-token window that
refuses longer requests the way real providers do (tests/support/windowed_model.py)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import PLAN_POLICY_SECTION_ID
from services.agentruntime.compaction import SUMMARY_HEADING
from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    context_overflow_reply,
    finish_chunk,
    text_chunk,
    usage_chunk,
)
from tests.support.stack import Stack, running_stack
from tests.support.windowed_model import (
    READ_ME,
    READ_PATH,
    SUMMARY_MARK,
    WindowedModel,
    count_like_bpe,
)

SID = "long"
WINDOW = 8000
TURNS = 200
# A 4 KB file: what each turn's read_file returns to the model.
BIG_TEXT = "".join(f"line {n:04d}: " + "x" * 50 + "\n" for n in range(66))[:4096]


def adapter(provider: FakeProvider) -> OpenAICompatAdapter:
    return OpenAICompatAdapter(
        OpenAICompatConfig(
            base_url=provider.url,
            model="windowed-8k",
            max_attempts=1,
            first_byte_timeout_s=10.0,
            idle_timeout_s=10.0,
            context_window=WINDOW,
        )
    )


@pytest.fixture
async def stack(tmp_path: Path, provider: FakeProvider) -> AsyncIterator[Stack]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / READ_PATH).write_text(BIG_TEXT)
    async with running_stack(tmp_path / "data", model=adapter(provider)) as running:
        await running.log.create_session(SID, str(workspace))
        yield running


async def turn(stack: Stack, text: str) -> None:
    await stack.runtime.Prompt(rt.PromptRequest(session_id=SID, text=text))
    await stack.wait_idle(SID)


async def read_all(stack: Stack) -> list[ev.Event]:
    events: list[ev.Event] = []
    while True:
        page = (await stack.log.read(SID, from_seq=len(events), limit=1000)).events
        events += page
        if len(page) < 1000:
            return events


def of_kind(events: list[ev.Event], kind: str) -> list[ev.Event]:
    return [e for e in events if e.WhichOneof("body") == kind]


async def test_two_hundred_turns_in_an_8k_window_compact_and_keep_everything(
    stack: Stack, provider: FakeProvider
) -> None:
    model = WindowedModel(WINDOW)
    provider.responder = model
    started = time.monotonic()
    restarted_at: int | None = None
    for number in range(TURNS):
        if number == 2:
            # Plan mode on while idle, before any compaction.
            await stack.plan.SetPlanMode(pm.SetPlanModeRequest(session_id=SID, active=True))
        if restarted_at is None and model.summaries >= 2:
            # A restart between compactions: the view is rebuilt from the last one.
            provider.requests.clear()
            stack.embedded.model = adapter(provider)
            await stack.restart("agentruntime")
            restarted_at = number
        await turn(stack, f"Turn {number}: {READ_ME}")
        if restarted_at == number:
            first = provider.requests[0].body["messages"]
            assert first[1]["role"] == "user" and first[1]["content"].startswith(SUMMARY_HEADING)
    elapsed = time.monotonic() - started

    events = await read_all(stack)
    ends = of_kind(events, "turn_end")
    assert len(ends) == TURNS
    assert all(e.turn_end.reason == ev.TURN_END_REASON_COMPLETED for e in ends)
    results = of_kind(events, "tool_result")
    assert len(results) >= TURNS and all(len(r.tool_result.output) >= 4096 for r in results)
    compactions = of_kind(events, "compaction")
    assert len(compactions) >= 2 and restarted_at is not None
    assert {c.compaction.trigger for c in compactions} == {"auto"}
    assert all(c.compaction.tokens_after < c.compaction.tokens_before for c in compactions)
    # No request the model served passed its window, and none was refused.
    assert max(model.served) <= WINDOW and model.refused == []
    # Plan mode, set once before the first compaction, is on after the last.
    assert len(of_kind(events, "plan_mode")) == 1
    reply = await stack.plan.GetPlanMode(pm.GetPlanModeRequest(session_id=SID))
    assert reply.state.active
    last_header = of_kind(events, "request_header")[-1].request_header
    assert PLAN_POLICY_SECTION_ID in {s.id for s in last_header.sections}
    # The usage in the log is what the provider reported, request by request.
    usage = [e.model_usage for e in of_kind(events, "model_usage")]
    assert [(u.prompt_tokens, u.completion_tokens, u.cached_prompt_tokens) for u in usage] == (
        model.reported
    )
    assert all(not u.estimated and u.context_window == WINDOW for u in usage)
    assert elapsed < 120, f"{TURNS} turns took {elapsed:.0f} s"
    print(f"{TURNS} turns, {len(compactions)} compactions, {elapsed:.1f} s")


def text_reply(text: str, prompt: int = 100) -> ProviderReply:
    return ProviderReply(
        stream=[text_chunk(text), finish_chunk("stop"), usage_chunk(prompt, 5), DONE]
    )


async def test_a_refused_request_is_compacted_and_retried_once(
    stack: Stack, provider: FakeProvider
) -> None:
    provider.enqueue(text_reply("first answer"))
    await turn(stack, "remember the number 42")
    provider.enqueue(
        context_overflow_reply(WINDOW, 9100),
        text_reply("The user asked to remember 42."),  # the summary
        text_reply("It was 42."),
    )
    await turn(stack, "what was the number?")
    events = await read_all(stack)
    assert events[-1].turn_end.reason == ev.TURN_END_REASON_COMPLETED
    (compaction,) = of_kind(events, "compaction")
    assert compaction.compaction.trigger == "overflow"
    assert compaction.compaction.summary == "The user asked to remember 42."
    retried = provider.requests[-1].body["messages"]
    assert retried[1]["content"].startswith(SUMMARY_HEADING)
    assert of_kind(events, "assistant_message")[-1].assistant_message.text == "It was 42."


@pytest.mark.parametrize("shape", ["openai", "deepseek"])
async def test_a_request_that_never_fits_ends_the_turn_with_a_typed_error(
    stack: Stack, provider: FakeProvider, shape: str
) -> None:
    provider.enqueue(
        context_overflow_reply(WINDOW, 9100, shape=shape),
        text_reply("A summary."),
        context_overflow_reply(WINDOW, 9050, shape=shape),
    )
    await turn(stack, "a huge request")
    events = await read_all(stack)
    end = events[-1].turn_end
    assert end.reason == ev.TURN_END_REASON_ERROR
    assert end.error.startswith("context overflow:")
    assert f"({WINDOW} tokens)" in end.error and "/compact" in end.error
    assert "larger context window" in end.error
    # The session goes on: the next turn is served.
    provider.enqueue(text_reply("fine"))
    await turn(stack, "something small")
    assert (await read_all(stack))[-1].turn_end.reason == ev.TURN_END_REASON_COMPLETED


async def test_compact_command_with_a_focus(stack: Stack, provider: FakeProvider) -> None:
    provider.enqueue(text_reply("hello"))
    await turn(stack, "let us work on the parser")
    commands = await stack.runtime.ListCommands(rt.ListCommandsRequest(session_id=SID))
    assert "compact" in [c.name for c in commands.commands]
    provider.enqueue(text_reply("We work on the parser."))
    reply = await stack.runtime.ExecuteCommand(
        rt.ExecuteCommandRequest(session_id=SID, name="compact", args="the parser")
    )
    assert reply.ok and reply.message.startswith("Conversation compacted (")
    asked = provider.requests[-1].body["messages"][-1]["content"]
    assert "focus on: the parser" in asked and "let us work on the parser" in asked
    events = await read_all(stack)
    assert [e.WhichOneof("body") for e in events[-4:]] == [
        "command_run",
        "model_usage",
        "compaction",
        "command_done",
    ]
    compaction = events[-2].compaction
    assert (compaction.trigger, compaction.focus) == ("manual", "the parser")
    provider.enqueue(text_reply("next"))
    await turn(stack, "go on")
    seen = provider.requests[-1].body["messages"]
    assert seen[1]["content"] == f"{SUMMARY_HEADING}\n\nWe work on the parser.\n\ngo on"


async def test_restart_after_compaction_reads_from_the_compaction(
    stack: Stack, provider: FakeProvider
) -> None:
    for n in range(3):
        provider.enqueue(text_reply(f"answer {n}"))
        await turn(stack, f"question {n}")
    provider.enqueue(text_reply("Summary of three questions."))
    await stack.runtime.ExecuteCommand(rt.ExecuteCommandRequest(session_id=SID, name="compact"))
    stack.embedded.model = adapter(provider)
    await stack.restart("agentruntime")
    provider.enqueue(text_reply("answer 3"))
    await asyncio.wait_for(turn(stack, "question 3"), 10)
    seen = [m.get("content") for m in provider.requests[-1].body["messages"][1:]]
    assert seen == [f"{SUMMARY_HEADING}\n\nSummary of three questions.\n\nquestion 3"]


async def test_the_threshold_is_judged_by_the_providers_count_not_only_the_estimate(
    stack: Stack, provider: FakeProvider
) -> None:
    # CJK-like text: the provider counts about three times the bytes/4 estimate.
    provider.enqueue(text_reply("noted", prompt=9000))
    await turn(stack, "x" * 8000)
    provider.enqueue(text_reply("Summary: a long message was noted."), text_reply("ok"))
    await turn(stack, "next")
    events = await read_all(stack)
    (compaction,) = of_kind(events, "compaction")
    # By the estimate alone the view was well under the threshold.
    assert compaction.compaction.tokens_before < 0.8 * WINDOW
    assert compaction.compaction.trigger == "auto"
    assert provider.requests[-1].body["messages"][1]["content"].startswith(SUMMARY_HEADING)


async def test_a_refused_summary_is_asked_again_with_less_then_ends_the_turn_typed(
    stack: Stack, provider: FakeProvider
) -> None:
    refusal = context_overflow_reply(WINDOW, 9100)
    provider.enqueue(refusal, refusal, text_reply("A shorter summary."), text_reply("done"))
    await turn(stack, "first")
    events = await read_all(stack)
    assert events[-1].turn_end.reason == ev.TURN_END_REASON_COMPLETED
    assert of_kind(events, "compaction")[0].compaction.summary == "A shorter summary."
    first_ask, second_ask = (len(r.body["messages"][-1]["content"]) for r in provider.requests[1:3])
    assert second_ask <= first_ask

    provider.enqueue(refusal, refusal, refusal)
    await turn(stack, "second")
    end = (await read_all(stack))[-1].turn_end
    assert end.reason == ev.TURN_END_REASON_ERROR
    assert end.error.startswith("context overflow:") and "summary request was refused" in end.error


# 4 KB of JSON, which a tokenizer splits into about twice as many tokens as
# its bytes / 4, and 4 KB of prose, which it splits into fewer.
JSON_TEXT = json.dumps([{"id": n, "ok": n % 2 == 0, "tags": ["a", "b"]} for n in range(200)])[:4096]
PROSE_TEXT = ("The parser reads the input and returns a tree of nodes. " * 80)[:4096]


async def test_sixty_turns_of_mixed_outputs_send_no_request_over_the_window(
    stack: Stack, provider: FakeProvider, tmp_path: Path
) -> None:
    """Each turn reads 4 KB, prose or JSON by turns, and a provider that
    counts like a tokenizer (no one ratio to the estimate fits both) with an
    8k window: the size of each request is predicted from the provider's
    count of the last one and what was added since, so none is refused."""
    model = WindowedModel(WINDOW, counter=count_like_bpe)
    provider.responder = model
    for number in range(60):
        dense = number % 3 == 2
        (tmp_path / "workspace" / READ_PATH).write_text(JSON_TEXT if dense else PROSE_TEXT)
        if number % 10 == 9:
            stack.embedded.model = adapter(provider)
            await stack.restart("agentruntime")
        await turn(stack, f"Turn {number}: {READ_ME}")
    events = await read_all(stack)
    ends = of_kind(events, "turn_end")
    assert [e.turn_end.reason for e in ends] == [ev.TURN_END_REASON_COMPLETED] * 60
    assert len(of_kind(events, "compaction")) >= 5
    assert model.refused == [] and max(model.served) <= WINDOW


async def test_after_a_restart_the_providers_last_count_still_predicts_the_next_request(
    stack: Stack, provider: FakeProvider
) -> None:
    """JSON pasted in a prompt counts three times its estimate. A restarted
    runtime reads the provider's count of the last request from the log, so
    the next one, twice as big again, is compacted first, not refused."""
    model = WindowedModel(WINDOW, counter=count_like_bpe)
    provider.responder = model
    await turn(stack, f"Check this: {JSON_TEXT[:3000]}")
    stack.embedded.model = adapter(provider)
    await stack.restart("agentruntime")
    await turn(stack, f"And this: {JSON_TEXT}")
    events = await read_all(stack)
    assert model.refused == []
    assert [c.compaction.trigger for c in of_kind(events, "compaction")] == ["auto"]
    assert of_kind(events, "turn_end")[-1].turn_end.reason == ev.TURN_END_REASON_COMPLETED


@dataclass(frozen=True)
class SmallWindow:
    """A window where the second turn's read fills it, yet that turn's
    prompt and read fit after a short summary, measured against the first
    request of this checkout (its tool catalog's size moves it): the read
    is about 0.7 of that request, the window about 2.9 of it."""

    base: int

    @property
    def window(self) -> int:
        return int(2.9 * self.base)

    @property
    def file_text(self) -> str:
        lines = int(2.3 * self.base) // 64
        return "".join(f"line {n:04d}: " + "x" * 53 + "\n" for n in range(lines))

    def adapter(self, provider: FakeProvider) -> OpenAICompatAdapter:
        return OpenAICompatAdapter(replace(adapter(provider).config, context_window=self.window))


async def small_window(tmp_path: Path, provider: FakeProvider) -> SmallWindow:
    """The first request of a session here, as the fake provider counts it."""
    model = WindowedModel(WINDOW * 100)
    provider.responder = model
    roomy = OpenAICompatAdapter(replace(adapter(provider).config, context_window=WINDOW * 100))
    async with running_stack(tmp_path / "measure", model=roomy) as stack:
        await stack.log.create_session(SID, str(tmp_path))
        await turn(stack, f"Turn 0: {READ_ME}.")
    return SmallWindow(model.served[0])


async def test_a_compaction_right_after_a_tool_result_keeps_the_turn_going(
    tmp_path: Path, provider: FakeProvider
) -> None:
    """The second turn's read fills the window: the compaction before the
    next request keeps that turn's prompt and its call and result verbatim
    after the summary, and a restarted runtime rebuilds the same view."""
    small = await small_window(tmp_path, provider)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / READ_PATH).write_text(small.file_text)
    # A summary that does not quote the prompt: what the model goes on
    # from must be the prompt itself.
    model = WindowedModel(small.window, summary="The user reads big.txt once a turn.")
    provider.responder = model
    async with running_stack(tmp_path / "data", model=small.adapter(provider)) as stack:
        await stack.log.create_session(SID, str(workspace))
        await turn(stack, f"Turn 0: {READ_ME}")
        assert model.summaries == 0
        await turn(stack, f"Turn 1: {READ_ME}")
        events = await read_all(stack)
        (compaction,) = of_kind(events, "compaction")
        assert compaction.compaction.trigger == "auto"
        # Compacted mid-turn, right after the tool result.
        before = events[: events.index(compaction)]
        assert [e for e in before if e.HasField("tool_result")][-1].seq > max(
            e.seq for e in before if e.HasField("turn_start")
        )
        compacted = provider.requests[-1].body["messages"]
        assert [m["role"] for m in compacted] == ["system", "user", "assistant", "tool"]
        # The summary, then the turn's prompt word for word.
        assert compacted[1]["content"].startswith(SUMMARY_HEADING)
        assert compacted[1]["content"].endswith(f"Turn 1: {READ_ME}")
        call = compacted[2]["tool_calls"][0]
        assert call["function"]["name"] == "read_file"
        assert compacted[3]["tool_call_id"] == call["id"]
        assert small.file_text.splitlines()[-1] in compacted[3]["content"]
        assert of_kind(events, "turn_end")[-1].turn_end.reason == ev.TURN_END_REASON_COMPLETED
        # The model went on from the result: it did not read the file again.
        turn_one = events[events.index(of_kind(events, "turn_start")[-1]) :]
        assert len(of_kind(turn_one, "tool_call")) == 1

        # A restarted runtime's view is the same, read from the log.
        stack.embedded.model = small.adapter(provider)
        await stack.restart("agentruntime")
        await turn(stack, "Turn 2: what did you find?")
        resumed = provider.requests[-1].body["messages"]
        assert resumed[: len(compacted)] == compacted
        assert resumed[-1] == {"role": "user", "content": "Turn 2: what did you find?"}
        assert model.refused == []


async def test_a_request_still_too_big_after_compacting_is_not_sent(
    tmp_path: Path, provider: FakeProvider
) -> None:
    """A summary that alone fills the window: the request after it would be
    refused (or leave no room for the answer), so it is never sent and the
    turn ends with the typed overflow error."""
    small = await small_window(tmp_path, provider)
    events, model = await two_reads(tmp_path, provider, small, "All of it. " * small.base)
    assert len(of_kind(events, "compaction")) == 1
    end = of_kind(events, "turn_end")[-1].turn_end
    assert end.reason == ev.TURN_END_REASON_ERROR and end.error.startswith("context overflow:")
    # The last request the provider saw was the summary request.
    assert SUMMARY_MARK in provider.requests[-1].body["messages"][-1]["content"]
    assert model.refused == []


async def test_a_tool_result_that_cannot_fit_beside_the_summary_ends_the_turn(
    tmp_path: Path, provider: FakeProvider
) -> None:
    """A summary that leaves room for the conversation's start but not for
    the read it was compacted after: a model going on from the summary
    alone would read the file again, and be compacted again, for ever. The
    turn ends with the typed overflow error after one compaction."""
    small = await small_window(tmp_path, provider)
    events, model = await two_reads(tmp_path, provider, small, "Read. " * (small.base // 3))
    assert len(of_kind(events, "compaction")) == 1
    end = of_kind(events, "turn_end")[-1].turn_end
    assert end.reason == ev.TURN_END_REASON_ERROR
    assert "the latest tool results do not fit beside the summary" in end.error
    turn_one = events[events.index(of_kind(events, "turn_start")[-1]) :]
    assert len(of_kind(turn_one, "tool_call")) == 1
    assert model.refused == []


async def two_reads(
    tmp_path: Path, provider: FakeProvider, small: SmallWindow, summary: str
) -> tuple[list[ev.Event], WindowedModel]:
    """Two turns that each read the file, the second's read compacted after
    with `summary`: the session's events and the provider's model."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / READ_PATH).write_text(small.file_text)
    model = WindowedModel(small.window, summary=summary)
    provider.responder = model
    async with running_stack(tmp_path / "data", model=small.adapter(provider)) as stack:
        await stack.log.create_session(SID, str(workspace))
        await turn(stack, f"Turn 0: {READ_ME}")
        await turn(stack, f"Turn 1: {READ_ME}")
        return await read_all(stack), model
