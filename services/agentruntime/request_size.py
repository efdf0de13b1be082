"""How many tokens the provider will count for a request, predicted before
it is sent, so that no request is sent that the model's window refuses.

The runtime's own estimate (UTF-8 bytes / 4, models/base.py) runs below
what providers count for code, JSON and non-Latin text, and by how much
depends on the text. So the prediction starts from the provider's own count
of the last request it answered in the same view (its model/usage, paired
with the estimate its request/header recorded) and adds only what changed
since: the estimate of the difference, scaled by how the provider counted
that request's estimate (never below 1) and a margin, since new text (a
tool's output) may be denser than the average. Without such a count (a
fresh view, a compaction since), the whole estimate is scaled the same way.

Both the count and the estimate come from the log, so a restarted runtime
predicts as well as the one that sent the request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Bounds of the provider's tokens per estimated token.
RATIO_BOUNDS = (0.5, 4.0)
# What is added since the counted request may be denser than its average.
ADDED_MARGIN = 1.25


@dataclass(frozen=True)
class CountedRequest:
    """A request the provider counted: the runtime's estimate of it and the
    provider's count of its prompt."""

    estimated_tokens: int
    prompt_tokens: int

    @property
    def ratio(self) -> float:
        """The provider's tokens per estimated token: about 1 for English and
        code, more for CJK text, whose characters take 3 bytes and a token
        or more each."""
        if self.estimated_tokens <= 0 or self.prompt_tokens <= 0:
            return 1.0
        low, high = RATIO_BOUNDS
        return min(max(self.prompt_tokens / self.estimated_tokens, low), high)


def predicted_tokens(
    estimated_tokens: int, counted: CountedRequest | None, ratio: float = 1.0
) -> int:
    """The provider's likely count of a request estimated at `estimated_tokens`.

    `counted`: the provider's count of the last request of the same view (a
    prefix of this one), or None; `ratio`: the provider's tokens per
    estimated token as last seen, for when there is no such count."""
    if counted is None:
        return math.ceil(estimated_tokens * max(ratio, 1.0))
    scale = max(counted.ratio, 1.0) * ADDED_MARGIN
    added = max(estimated_tokens - counted.estimated_tokens, 0)
    return counted.prompt_tokens + math.ceil(added * scale)
