"""A sliding-window rate limiter: at most `limit` events per key in the last `window_s`.

Why this shape: it sits in front of every write and every secret check of the
HTTP server, so it must cost next to nothing and never make one caller wait
for another. Keys are spread over stripes, each with its own lock and its own
table, so callers contend only when their keys share a stripe and only for a
few list operations. Each key keeps the moments of its recent events (at most
`limit` of them), so the window is exact and `Retry-After` says when the
oldest one leaves it.

Memory is bounded: a key whose last event left the window is dropped, and a
stripe over its share of `max_keys` drops its least recently used keys (a
flood of new addresses can only reset others' windows, never grow the
table).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from zlib import crc32

__all__ = ["SlidingWindow", "retry_after_s"]

DEFAULT_MAX_KEYS = 10_000
_STRIPES = 16


class _Stripe:
    """The keys of one stripe, least recently used first, behind their own lock."""

    __slots__ = ("keys", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.keys: OrderedDict[str, deque[float]] = OrderedDict()


class SlidingWindow:
    """At most `limit` events per key within any `window_s` seconds; `limit` 0 allows all."""

    def __init__(
        self,
        limit: int,
        window_s: float = 60.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = DEFAULT_MAX_KEYS,
    ) -> None:
        if limit < 0 or window_s <= 0 or max_keys < 1:
            raise ValueError("limit >= 0, window_s > 0 and max_keys >= 1")
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._per_stripe = max(1, math.ceil(max_keys / _STRIPES))
        self._stripes = tuple(_Stripe() for _ in range(_STRIPES))

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def acquire(self, key: str) -> float:
        """Take a place for one event now: 0.0 if taken, else the seconds until one frees."""
        return self._take(key, record=True, always=False)

    def peek(self, key: str) -> float:
        """Like `acquire`, but only look: 0.0 if an event would be allowed now."""
        return self._take(key, record=False, always=False)

    def record(self, key: str) -> None:
        """Count an event that already happened (a failure seen after the fact), allowed or not."""
        self._take(key, record=True, always=True)

    def release(self, key: str) -> None:
        """Give back the newest place of `key` (an attempt that turned out not to count)."""
        if not self.enabled:
            return
        stripe = self._stripe(key)
        with stripe.lock:
            moments = stripe.keys.get(key)
            if moments:
                moments.pop()

    def __len__(self) -> int:
        """Keys held now (for tests of the memory bound)."""
        return sum(len(stripe.keys) for stripe in self._stripes)

    def _stripe(self, key: str) -> _Stripe:
        return self._stripes[crc32(key.encode("utf-8", "surrogatepass")) % _STRIPES]

    def _take(self, key: str, *, record: bool, always: bool) -> float:
        if not self.enabled:
            return 0.0
        now = self._clock()
        horizon = now - self.window_s
        stripe = self._stripe(key)
        with stripe.lock:
            keys = stripe.keys
            moments = keys.get(key)
            if moments is None:
                if not record:
                    return 0.0
                moments = keys[key] = deque(maxlen=self.limit)
                self._evict(keys, horizon)
            else:
                keys.move_to_end(key)
            while moments and moments[0] <= horizon:
                moments.popleft()
            if len(moments) >= self.limit and not always:
                return max(moments[0] - horizon, 0.001)
            if record:
                moments.append(now)  # a full deque (`always`) forgets its oldest
            return 0.0

    def _evict(self, keys: OrderedDict[str, deque[float]], horizon: float) -> None:
        """Drop idle keys from the least recently used end, then any over this stripe's share."""
        while len(keys) > 1:
            oldest = next(iter(keys.values()))
            if oldest and oldest[-1] > horizon:
                break
            keys.popitem(last=False)
        while len(keys) > self._per_stripe:
            keys.popitem(last=False)


def retry_after_s(wait_s: float) -> int:
    """`Retry-After` in whole seconds, never 0 (a client would retry at once)."""
    return max(1, math.ceil(wait_s))
