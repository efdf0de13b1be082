"""The `usage` fold: what a session's model requests used, from its
model/usage events (one per request, as the provider reported it).

The view (the `usage` projection value; None before any request):

    {"model": "deepseek-chat",        # the last request's model
     "context_tokens": 52000,         # the last request's prompt + completion
     "context_window": 128000,        # that model's window (from the event)
     "context_share": 0.41,           # context_tokens / context_window (0: unknown)
     "prompt_tokens": ..., "completion_tokens": ..., "cached_prompt_tokens": ...,
     "requests": 7,                   # the session's totals so far
     "cost": 0.08,                    # USD, summed over the requests that had one
     "estimated": false}              # the last figures are an estimate

A compaction leaves the totals alone; the context is then the compacted
view's estimated size (`tokens_after`) until the next request reports. A
subagent's turn (a model/usage naming its child session) adds to the totals
only: its context is its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agenthost.sessionlog.v1.events_pb2 import Event


@dataclass(frozen=True)
class UsageFold:
    requests: int = 0
    model: str = ""
    context_tokens: int = 0
    context_window: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    # None until a request with a cost (its model has prices) is recorded.
    cost: float | None = None
    estimated: bool = False


# The event kinds fold_usage reads: any other leaves its state as it is.
USAGE_KINDS = frozenset({"compaction", "model_usage"})


def fold_usage(state: UsageFold, event: Event) -> UsageFold:
    kind = event.WhichOneof("body")
    if kind == "compaction" and state.requests:
        return _replace(state, context_tokens=event.compaction.tokens_after)
    if kind != "model_usage":
        return state
    used = event.model_usage
    cost = state.cost
    if used.HasField("cost"):
        cost = (cost or 0.0) + used.cost
    if used.child_session_id:
        # A subagent's turn: its use counts in the totals, not in the context.
        fields = {name: getattr(state, name) for name in state.__dataclass_fields__}
        return UsageFold(
            **{
                **fields,
                "requests": state.requests + used.requests,
                "prompt_tokens": state.prompt_tokens + used.prompt_tokens,
                "completion_tokens": state.completion_tokens + used.completion_tokens,
                "cached_prompt_tokens": state.cached_prompt_tokens + used.cached_prompt_tokens,
                "cost": cost,
            }
        )
    return UsageFold(
        requests=state.requests + 1,
        model=used.model,
        context_tokens=used.prompt_tokens + used.completion_tokens,
        context_window=used.context_window,
        prompt_tokens=state.prompt_tokens + used.prompt_tokens,
        completion_tokens=state.completion_tokens + used.completion_tokens,
        cached_prompt_tokens=state.cached_prompt_tokens + used.cached_prompt_tokens,
        cost=cost,
        estimated=used.estimated,
    )


def _replace(state: UsageFold, *, context_tokens: int) -> UsageFold:
    if context_tokens == state.context_tokens:
        return state
    fields = {name: getattr(state, name) for name in state.__dataclass_fields__}
    return UsageFold(**{**fields, "context_tokens": context_tokens})


def usage_view(state: UsageFold) -> dict[str, Any] | None:
    """The `usage` projection value (None before any request)."""
    if not state.requests:
        return None
    window = state.context_window
    return {
        "model": state.model,
        "context_tokens": state.context_tokens,
        "context_window": window,
        "context_share": state.context_tokens / window if window else 0.0,
        "prompt_tokens": state.prompt_tokens,
        "completion_tokens": state.completion_tokens,
        "cached_prompt_tokens": state.cached_prompt_tokens,
        "requests": state.requests,
        "cost": state.cost,
        "estimated": state.estimated,
    }


def load_usage(data: dict[str, Any]) -> UsageFold:
    cost = data["cost"]
    return UsageFold(
        requests=int(data["requests"]),
        model=str(data["model"]),
        context_tokens=int(data["context_tokens"]),
        context_window=int(data["context_window"]),
        prompt_tokens=int(data["prompt_tokens"]),
        completion_tokens=int(data["completion_tokens"]),
        cached_prompt_tokens=int(data["cached_prompt_tokens"]),
        cost=None if cost is None else float(cost),
        estimated=bool(data["estimated"]),
    )
