"""The pure parts of compaction: when it is due, what the summary request
holds, how the threshold is configured."""

from __future__ import annotations

import pytest

from services.agentruntime.compaction import (
    SUMMARY_PROMPT,
    CompactionPolicy,
    summary_request,
)
from services.agentruntime.models.base import (
    AssistantMessage,
    ChatMessage,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)


def test_the_threshold_comes_from_the_environment_and_bad_values_say_so() -> None:
    assert CompactionPolicy.from_env({}).threshold == 0.8
    assert CompactionPolicy.from_env({"AGENTHOST_COMPACT_THRESHOLD": "0.5"}).due(5001, 10000)
    assert not CompactionPolicy.from_env({"AGENTHOST_COMPACT_THRESHOLD": "0.5"}).due(5000, 10000)
    for bad in ("lots", "0", "1.5"):
        with pytest.raises(ValueError, match="AGENTHOST_COMPACT_THRESHOLD"):
            CompactionPolicy.from_env({"AGENTHOST_COMPACT_THRESHOLD": bad})


def test_the_summary_request_keeps_the_newest_parts_within_its_budget() -> None:
    call = ToolCallRequest("c1", "read_file", '{"path": "a.py"}')
    old: list[ChatMessage] = [UserMessage(f"old request {n} " + "o" * 3000) for n in range(20)]
    recent: list[ChatMessage] = [
        UserMessage("fix the parser"),
        AssistantMessage("Reading it.", (call,)),
        ToolResultMessage("c1", "x" * 50_000),
    ]
    request = summary_request([*old, *recent], [], "the parser", budget_tokens=3000)
    (asked,) = request.messages
    assert isinstance(asked, UserMessage) and not request.tools
    assert request.estimated_tokens() <= 3000
    text = asked.text
    # Written out, newest kept, each part cut, the prompt and the focus last.
    assert "## user\nfix the parser" in text and "## tool call read_file (c1)" in text
    assert "bytes cut" in text and "x" * 2000 not in text
    assert "earlier parts left out]" in text and "old request 0 " not in text
    assert text.endswith(f"{SUMMARY_PROMPT}\n\nThe user asks the summary to focus on: the parser")
