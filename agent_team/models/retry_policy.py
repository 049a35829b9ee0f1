"""How long a model call waits before it tries again, and when it stops trying one model.

Why our own loop and not the provider clients' retries: the clients retry
inside one `invoke`, where a cancel cannot reach the pause, the budget sees
one call, and the task's record shows no attempt. So the registry builds
every client with `max_retries=0` and `ModelCaller` retries here, one
attempt at a time (docs/architecture.md §4, "Model calls").

The pause before retry n (1, 2, ...) is `backoff_s * 2**(n-1)`, capped at
`backoff_max_s`, times a jitter factor in [0.5, 1.0] so that several daemons
hit by one outage do not come back in step. A provider's `retry-after`
(or `retry-after-ms`) is a floor: we never come back sooner than asked. A
call retries only while its time so far (attempts and pauses, every model
counted) plus the next pause stays within `window_s`; past it, each model
left is asked once, and the call ends.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The settings `AGENT_TEAM_MODEL_RETRIES`, `_BACKOFF_S`, `_RETRY_WINDOW_S` and `_TIMEOUT_S`.

    Attributes:
        retries: retries on one model after an error worth retrying (so
            `retries + 1` attempts at most per model).
        backoff_s: the first pause; it doubles per retry.
        backoff_max_s: the longest pause back-off alone chooses.
        window_s: how long one call keeps retrying, its attempts and pauses counted.
        timeout_s: the longest one attempt may take (None: the client's own).
        jitter: a number in [0, 1) per pause (tests pin it).
    """

    retries: int = 2
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0
    window_s: float = 120.0
    timeout_s: float | None = 300.0
    jitter: Callable[[], float] = field(default=random.random, compare=False)

    def pause_s(self, retry: int, retry_after_s: float | None) -> float:
        """The pause before retry number `retry` (1 for the first), the provider's ask honoured."""
        backoff = min(self.backoff_max_s, self.backoff_s * 2.0 ** max(0, retry - 1))
        chosen = backoff * (0.5 + self.jitter() / 2)
        return max(chosen, retry_after_s or 0.0)

    def may_retry(self, attempt: int, pause_s: float, spent_s: float) -> bool:
        """Whether attempt number `attempt` (just failed) may be followed by another after
        `pause_s`, when the call has taken `spent_s` so far."""
        return attempt <= self.retries and spent_s + pause_s <= self.window_s
