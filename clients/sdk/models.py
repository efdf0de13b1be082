"""The models a session can use (ListModels) and what its requests used
(the `usage` projection value), as plain values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agenthost.runtime.v1 import runtime_pb2 as rt

from .errors import INVALID_REPLY, InvalidReplyError


@dataclass(frozen=True)
class ModelPrices:
    """USD per million tokens; `cached_input` None: cached input costs `input`."""

    input: float
    output: float
    cached_input: float | None = None


@dataclass(frozen=True)
class ModelInfo:
    """One configured model: its name (what `Session.set_model` takes), the
    provider and the provider's id for it, its limits and prices."""

    name: str
    provider: str
    provider_model: str
    context_window: int
    max_output_tokens: int
    prices: ModelPrices | None
    is_default: bool
    # The model takes images (a prompt's, a tool's).
    images: bool = False


@dataclass(frozen=True)
class Usage:
    """What the session's model requests used (the `usage` projection):
    the last request's context (its prompt and answer) against its model's
    window, and the session's totals. `cost` is in USD, summed over the
    requests whose model has prices (None when none had)."""

    model: str
    context_tokens: int
    context_window: int
    context_share: float
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    requests: int
    cost: float | None
    estimated: bool


def model_info(info: rt.ModelInfo) -> ModelInfo:
    """A ListModels entry as the SDK's plain value."""
    prices = None
    if info.HasField("prices"):
        cached = info.prices.cached_input if info.prices.HasField("cached_input") else None
        prices = ModelPrices(info.prices.input, info.prices.output, cached)
    return ModelInfo(
        info.name,
        info.provider,
        info.provider_model,
        info.context_window,
        info.max_output_tokens,
        prices,
        info.is_default,
        info.images,
    )


_COUNTS = (
    "context_tokens",
    "context_window",
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
    "requests",
)


def usage_value(view: Any) -> Usage | None:
    """A `usage` projection value (None before the first request)."""
    if view is None:
        return None
    try:
        counts = {name: _count(view[name]) for name in _COUNTS}
        cost = view["cost"]
        return Usage(
            model=str(view["model"]),
            context_share=float(view["context_share"]),
            cost=None if cost is None else float(cost),
            estimated=bool(view["estimated"]),
            **counts,
        )
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidReplyError(
            f"usage value breaks the contract ({error}): {view!r}", reason=INVALID_REPLY
        ) from error


def _count(value: Any) -> int:
    # JSON numbers arrive as floats (google.protobuf.Value).
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return int(value)
