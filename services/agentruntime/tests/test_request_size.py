"""The prediction of a request's size as the provider will count it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.agentruntime.request_size import ADDED_MARGIN, CountedRequest, predicted_tokens

tokens = st.integers(min_value=1, max_value=500_000)


def test_the_ratio_follows_the_providers_count_within_bounds() -> None:
    assert CountedRequest(1000, 2000).ratio == 2.0
    assert CountedRequest(1000, 100_000).ratio == 4.0
    assert CountedRequest(1000, 10).ratio == 0.5
    assert CountedRequest(0, 500).ratio == 1.0 and CountedRequest(1000, 0).ratio == 1.0


def test_what_was_added_is_scaled_by_the_providers_density_and_a_margin() -> None:
    # The provider counted twice the estimate; 1000 estimated tokens were added.
    counted = CountedRequest(estimated_tokens=3000, prompt_tokens=6000)
    assert predicted_tokens(4000, counted) == 6000 + round(1000 * 2 * ADDED_MARGIN)


def test_without_a_count_the_estimate_is_scaled_never_below_itself() -> None:
    assert predicted_tokens(1000, None) == 1000
    assert predicted_tokens(1000, None, ratio=3.0) == 3000
    assert predicted_tokens(1000, None, ratio=0.5) == 1000


@given(tokens, tokens, tokens)
def test_a_request_that_grew_is_predicted_at_least_at_the_providers_count(
    sent: int, counted: int, now: int
) -> None:
    basis = CountedRequest(sent, counted)
    predicted = predicted_tokens(now, basis)
    assert predicted >= counted
    if now > sent:
        # The added part counts at least as much as the estimate of it.
        assert predicted - counted >= now - sent


@given(tokens, tokens, tokens, tokens)
def test_the_prediction_grows_with_the_request(sent: int, counted: int, a: int, b: int) -> None:
    basis = CountedRequest(sent, counted)
    low, high = sorted((a, b))
    assert predicted_tokens(low, basis) <= predicted_tokens(high, basis)
    assert predicted_tokens(low, None, 1.5) <= predicted_tokens(high, None, 1.5)
