"""Compaction: when the conversation would fill too much of the model's
context window, the model summarises it, and from then on sees the system
sections, the summary and what came after (transcript.py). The log keeps
every event; only the model's view starts at the latest compaction.

Pure decisions and texts; the agent runs the summary request and records it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agenthost.sessionlog.v1 import events_pb2 as ev

from .models.base import (
    AssistantMessage,
    ChatMessage,
    ModelRequest,
    ToolResultMessage,
    UserMessage,
    estimate_tokens,
)

ENV_THRESHOLD = "AGENTHOST_COMPACT_THRESHOLD"
DEFAULT_THRESHOLD = 0.8
AUTO, MANUAL, OVERFLOW = "auto", "manual", "overflow"
# How the summary shows in the model's view.
SUMMARY_HEADING = "[Summary of the conversation so far, written when it was compacted]"
# In the summary request, each message is cut to this many bytes at most
# (head and tail), so a conversation past the window can still be summarised.
SUMMARY_MESSAGE_BYTES = 2048

SUMMARY_PROMPT = """\
The conversation above is about to be compacted: everything before this \
message will be replaced by the summary you write now, and the work goes on \
from it. Write that summary for yourself. Keep:
1. The user's goals and every instruction still in force, the latest \
instructions word for word.
2. Decisions made and why, and approaches tried that failed.
3. Files read, created or changed (paths), and what changed in them.
4. Where the work stands: what is done, what is under way, what comes next.
5. Open questions and anything the user is waiting for.
Be specific (names, paths, numbers) and brief. Answer with the summary only."""


@dataclass(frozen=True)
class CompactionPolicy:
    # Compact before a request estimated above this share of the window.
    threshold: float = DEFAULT_THRESHOLD

    def __post_init__(self) -> None:
        if not 0.1 <= self.threshold <= 1.0:
            raise ValueError(
                f"the compaction threshold is a share of the window in [0.1, 1], "
                f"not {self.threshold!r}"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CompactionPolicy:
        env = os.environ if env is None else env
        raw = env.get(ENV_THRESHOLD, "").strip()
        if not raw:
            return cls()
        try:
            return cls(float(raw))
        except ValueError as error:
            raise ValueError(f"{ENV_THRESHOLD}={raw!r}: {error}") from None

    def due(self, request_tokens: int, context_window: int) -> bool:
        return request_tokens > self.threshold * context_window


def summary_message(summary: str) -> UserMessage:
    return UserMessage(f"{SUMMARY_HEADING}\n\n{summary}")


def summary_request(
    messages: Sequence[ChatMessage],
    sections: Sequence[ev.PromptSection],
    focus: str,
    budget_tokens: int,
) -> ModelRequest:
    """The request asking for the summary: one user message with the
    conversation written out (each part cut to SUMMARY_MESSAGE_BYTES, the
    oldest parts left out while over `budget_tokens`) and the summary
    prompt; no tools. Written out rather than replayed, so no tool call
    loses its result when the oldest parts go."""
    prompt = SUMMARY_PROMPT
    if focus.strip():
        prompt += f"\n\nThe user asks the summary to focus on: {focus.strip()}"
    parts = [part for message in messages for part in _written(message)]
    budget = budget_tokens - estimate_tokens(prompt, *(s.text for s in sections))
    kept: list[str] = []
    for part in reversed(parts):
        budget -= estimate_tokens(part)
        if budget < 0:
            break
        kept.append(part)
    left_out = len(parts) - len(kept)
    skipped = [f"[{left_out} earlier parts left out]"] if left_out else []
    text = "\n\n".join(["<conversation>", *skipped, *reversed(kept), "</conversation>", prompt])
    return ModelRequest(messages=[UserMessage(text)], sections=sections)


def _written(message: ChatMessage) -> list[str]:
    match message:
        case UserMessage(text=text):
            return [f"## user\n{_cut(text)}"]
        case ToolResultMessage(call_id=call_id, content=content, ok=ok):
            return [f"## tool result ({call_id}{'' if ok else ', failed'})\n{_cut(content)}"]
        case AssistantMessage(text=text, tool_calls=calls):
            said = [f"## assistant\n{_cut(text)}"] if text else []
            return said + [
                f"## tool call {c.name} ({c.call_id})\n{_cut(c.args_json)}" for c in calls
            ]


def fallback_summary(messages: Sequence[ChatMessage]) -> str:
    """What stands in for a summary when the model answered with none: the
    user's messages, the latest last, cut short."""
    users = [m.text for m in messages if isinstance(m, UserMessage)]
    return "The user's messages so far:\n" + "\n".join(f"- {_cut(text)}" for text in users[-20:])


def view_tokens(
    summary: str,
    sections: Sequence[ev.PromptSection],
    tools: Sequence[ev.ToolSchema],
    kept: Sequence[ChatMessage] = (),
) -> int:
    """The estimated size of the model's view right after a compaction."""
    messages = [summary_message(summary), *kept]
    return ModelRequest(messages=messages, sections=sections, tools=tools).estimated_tokens()


def tokens_label(tokens: int) -> str:
    """52000 -> "52k"; below 1000 the number itself."""
    return f"{round(tokens / 1000)}k" if tokens >= 1000 else str(tokens)


def _cut(text: str) -> str:
    """`text` within SUMMARY_MESSAGE_BYTES: its head and tail around a mark."""
    raw = text.encode()
    if len(raw) <= SUMMARY_MESSAGE_BYTES:
        return text
    half = SUMMARY_MESSAGE_BYTES // 2
    head, tail = raw[:half].decode(errors="ignore"), raw[-half:].decode(errors="ignore")
    return f"{head}\n[… {len(raw) - 2 * half} bytes cut …]\n{tail}"
