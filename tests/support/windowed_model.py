"""A model behind the fake OpenAI-compatible provider that behaves like a
real one with a small context window: it counts each request's tokens (its
JSON size / 4, its own count, not the runtime's estimate), refuses one
longer than its window with the real 400 "context length exceeded" shape,
and reports usage (prompt, completion, cached) on every stream it serves.

What it answers: a summary request (the runtime's compaction prompt) gets a
short summary ending with the latest user instruction; a user message
ending with READ_ME gets a read_file call of READ_PATH; a tool result gets
a short text. It records every request's size and every usage it reported.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.agentruntime.compaction import SUMMARY_PROMPT
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    ProviderReply,
    StreamItem,
    chunk,
    context_overflow_reply,
    finish_chunk,
    text_chunk,
    tool_fragment,
    usage_chunk,
)

READ_ME = "please read big.txt"
READ_PATH = "big.txt"
SUMMARY_MARK = SUMMARY_PROMPT.split(":", 1)[0]


@dataclass
class WindowedModel:
    window: int
    # Refuse this many of the next requests as too long, whatever their size.
    refuse_next: int = 0
    # What a summary request is answered with (None: a summary ending with
    # the latest instruction, word for word).
    summary: str | None = None
    # How it counts a request's tokens.
    counter: Callable[[dict[str, Any]], int] = field(default=lambda body: count_tokens(body))
    # Tokens of each request served, in order (refused ones are not served).
    served: list[int] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    # (prompt, completion, cached) reported, in order.
    reported: list[tuple[int, int, int]] = field(default_factory=list)
    summaries: int = 0
    _calls: int = 0
    _previous_prompt: int = 0

    def __call__(self, body: dict[str, Any]) -> ProviderReply:
        tokens = self.counter(body)
        if tokens > self.window or self.refuse_next > 0:
            self.refuse_next = max(0, self.refuse_next - 1)
            self.refused.append(tokens)
            return context_overflow_reply(self.window, max(tokens, self.window + 1))
        self.served.append(tokens)
        last = body["messages"][-1]
        content = str(last.get("content") or "")
        if last["role"] == "user" and SUMMARY_MARK in content:
            self.summaries += 1
            return self._text(tokens, self.summary or summary_of(content))
        if last["role"] == "user" and content.rstrip().endswith(READ_ME):
            return self._read(tokens)
        return self._text(tokens, "Read it; the file is as expected.")

    def _text(self, tokens: int, text: str) -> ProviderReply:
        return self._reply(tokens, [text_chunk(text)], "stop", len(text) // 4 + 1)

    def _read(self, tokens: int) -> ProviderReply:
        self._calls += 1
        fragment = tool_fragment(
            0,
            call_id=f"call_{self._calls}",
            name="read_file",
            arguments=json.dumps({"path": READ_PATH}),
        )
        return self._reply(tokens, [fragment], "tool_calls", 12)

    def _reply(
        self, tokens: int, items: list[StreamItem], finish: str, completion: int
    ) -> ProviderReply:
        # A prompt cache serves the prefix the previous request shared.
        cached = min(tokens, self._previous_prompt) // 2
        self._previous_prompt = tokens
        self.reported.append((tokens, completion, cached))
        stream: list[StreamItem] = [
            chunk({"role": "assistant", "content": ""}),
            *items,
            finish_chunk(finish),
            usage_chunk(tokens, completion, cached, model="windowed-8k"),
            DONE,
        ]
        return ProviderReply(stream=stream)


def count_tokens(body: dict[str, Any]) -> int:
    size = len(json.dumps(body["messages"])) + len(json.dumps(body.get("tools", [])))
    return math.ceil(size / 4)


# Roughly how a byte-pair tokenizer splits text: a word with the space
# before it, up to three digits, a run of spaces, any other character.
BPE_PIECE = re.compile(r" ?[A-Za-z]+| ?\d{1,3}|\s+|[^\sA-Za-z\d]")


def count_like_bpe(body: dict[str, Any]) -> int:
    """Tokens as a real provider's tokenizer counts them, roughly: prose
    counts fewer than its bytes / 4, code and JSON (punctuation) and
    non-Latin text more, so no one ratio fits a whole conversation."""
    texts = [json.dumps(body.get("tools", []))]
    for message in body["messages"]:
        texts.append(str(message.get("content") or ""))
        texts += [json.dumps(call) for call in message.get("tool_calls", [])]
    return sum(len(BPE_PIECE.findall(text)) + 4 for text in texts)


def summary_of(request_text: str) -> str:
    instructions = [line for line in request_text.splitlines() if READ_ME in line]
    latest = instructions[-1] if instructions else "none"
    return (
        "Goals: read big.txt once per turn when asked. Decisions: none. Files touched: "
        f"big.txt (read only). Open questions: none. Latest instruction:\n{latest}"
    )
