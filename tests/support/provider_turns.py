"""Turns of a real runtime over the local OpenAI-compatible fake provider:
its replies (text, a tool call) and what a request carried."""

from __future__ import annotations

import json
from typing import Any

from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    finish_chunk,
    text_chunk,
    tool_fragment,
    usage_chunk,
)
from tests.support.stack import Stack


def adapter(provider: FakeProvider) -> OpenAICompatAdapter:
    return OpenAICompatAdapter(
        OpenAICompatConfig(
            base_url=provider.url,
            model="fake",
            max_attempts=1,
            first_byte_timeout_s=10.0,
            idle_timeout_s=10.0,
            context_window=32000,
        )
    )


def text_reply(text: str) -> ProviderReply:
    return ProviderReply(stream=[text_chunk(text), finish_chunk("stop"), usage_chunk(500, 5), DONE])


def call_reply(name: str, args: dict[str, Any], call_id: str) -> ProviderReply:
    fragment = tool_fragment(0, call_id=call_id, name=name, arguments=json.dumps(args))
    return ProviderReply(stream=[fragment, finish_chunk("tool_calls"), usage_chunk(500, 5), DONE])


async def turn(stack: Stack, session_id: str, text: str) -> None:
    await stack.runtime.Prompt(rt.PromptRequest(session_id=session_id, text=text))
    await stack.wait_idle(session_id)


def sent(provider: FakeProvider, index: int = -1) -> str:
    """Everything a request's messages carried, as one text."""
    messages: list[dict[str, Any]] = provider.requests[index].body["messages"]
    return "\n".join(str(m.get("content") or "") for m in messages)


def tool_names(provider: FakeProvider, index: int = -1) -> list[str]:
    """The tools a request offered."""
    tools: list[dict[str, Any]] = provider.requests[index].body.get("tools", [])
    return [t["function"]["name"] for t in tools]


async def logged(stack: Stack, session_id: str) -> list[ev.Event]:
    return list((await stack.log.read(session_id, limit=1000)).events)
