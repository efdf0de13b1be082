"""The usage fold: the context in use and the session's totals, from model/usage."""

from __future__ import annotations

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.projection.session_units import USAGE_UNIT
from services.sessionlog.usage import UsageFold, fold_usage, usage_view


def used(
    prompt: int,
    completion: int,
    *,
    cached: int = 0,
    cost: float | None = None,
    model: str = "deepseek-chat",
    window: int = 128_000,
    estimated: bool = False,
) -> ev.Event:
    usage = ev.ModelUsage(
        turn_id="t",
        model=model,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_prompt_tokens=cached,
        context_window=window,
        estimated=estimated,
    )
    if cost is not None:
        usage.cost = cost
    return ev.Event(model_usage=usage)


def folded(*events: ev.Event) -> UsageFold:
    state = UsageFold()
    for event in events:
        state = fold_usage(state, event)
    return state


def test_nothing_is_shown_before_the_first_request() -> None:
    message = ev.Event(user_message=ev.UserMessage(text="hi"))
    assert usage_view(folded(message)) is None


def test_the_context_is_the_last_requests_and_the_totals_are_sums() -> None:
    view = usage_view(
        folded(
            used(1000, 200, cached=0, cost=0.001),
            used(40_000, 12_000, cached=900, cost=0.02, model="deepseek-reasoner"),
        )
    )
    assert view == {
        "model": "deepseek-reasoner",
        "context_tokens": 52_000,
        "context_window": 128_000,
        "context_share": pytest.approx(52_000 / 128_000),
        "prompt_tokens": 41_000,
        "completion_tokens": 12_200,
        "cached_prompt_tokens": 900,
        "requests": 2,
        "cost": pytest.approx(0.021),
        "estimated": False,
    }


def test_cost_is_summed_over_the_priced_requests_only() -> None:
    assert usage_view(folded(used(10, 5)))["cost"] is None  # type: ignore[index]
    view = usage_view(folded(used(10, 5), used(10, 5, cost=0.5), used(10, 5)))
    assert view is not None and view["cost"] == 0.5


def test_an_unknown_window_shows_no_share() -> None:
    view = usage_view(folded(used(10, 5, window=0, estimated=True)))
    assert view is not None
    assert (view["context_share"], view["estimated"]) == (0.0, True)


def test_a_compaction_shrinks_the_context_until_the_next_request() -> None:
    compacted = ev.Event(
        compaction=ev.Compaction(summary="s", tokens_before=50_000, tokens_after=3000)
    )
    state = folded(used(48_000, 2000), compacted)
    assert (state.context_tokens, state.prompt_tokens) == (3000, 48_000)
    assert folded(compacted) == UsageFold()  # nothing to shrink before a request
    assert fold_usage(state, used(3500, 100)).context_tokens == 3600


def test_an_unrelated_event_leaves_the_very_same_state() -> None:
    state = folded(used(10, 5))
    assert fold_usage(state, ev.Event(user_message=ev.UserMessage(text="x"))) is state


def test_the_unit_checkpoints_and_restores_its_state() -> None:
    state = folded(used(10, 5, cost=0.25), used(20, 5, cached=3))
    assert USAGE_UNIT.load(USAGE_UNIT.dump(state)) == state
    assert USAGE_UNIT.load(USAGE_UNIT.dump(UsageFold())) == UsageFold()
