"""`RetryPolicy`: how long a model call pauses before it tries again, and when it stops.

The pauses are pure arithmetic over an injected jitter, so they are tested here with
the jitter pinned (exact pauses) or drawn from a seeded `random.Random` (the spread),
rather than through a caller whose real pauses would slow the suite.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from agent_team.models.retry_policy import RetryPolicy

FULL = 1.0  # jitter at its top: the factor 0.5 + jitter / 2 is 1, the whole back-off
HALF = 0.0  # jitter at its bottom: the factor is 0.5, half the back-off


def pinned(jitter: float, **settings: Any) -> RetryPolicy:
    """A policy whose jitter always returns `jitter`."""
    return RetryPolicy(jitter=lambda: jitter, **settings)


# --- pause_s -------------------------------------------------------------------------------------


def test_the_pause_doubles_with_each_retry() -> None:
    policy = pinned(FULL, backoff_s=1.0, backoff_max_s=1000.0)

    assert [policy.pause_s(retry, None) for retry in range(1, 7)] == [1, 2, 4, 8, 16, 32]


def test_the_first_pause_is_backoff_s() -> None:
    assert pinned(FULL, backoff_s=2.5).pause_s(1, None) == 2.5


def test_the_lowest_jitter_halves_the_pause() -> None:
    policy = pinned(HALF, backoff_s=1.0, backoff_max_s=1000.0)

    assert [policy.pause_s(retry, None) for retry in range(1, 5)] == [0.5, 1, 2, 4]


def test_the_pause_is_capped_at_backoff_max_s() -> None:
    policy = pinned(FULL, backoff_s=1.0, backoff_max_s=30.0)

    assert [policy.pause_s(retry, None) for retry in range(4, 9)] == [8, 16, 30, 30, 30]
    assert policy.pause_s(60, None) == 30  # far past the cap, no overflow into huge pauses


def test_jitter_applies_after_the_cap() -> None:
    # Daemons that all reached the cap must still come back out of step.
    policy = pinned(HALF, backoff_s=1.0, backoff_max_s=30.0)

    assert policy.pause_s(10, None) == 15


def test_the_default_cap_is_thirty_seconds() -> None:
    assert pinned(FULL, backoff_s=1.0).pause_s(20, None) == 30


def test_no_backoff_means_no_pause() -> None:
    assert pinned(FULL, backoff_s=0.0).pause_s(5, None) == 0


def test_jittered_pauses_fall_between_half_and_the_whole_backoff() -> None:
    draws = random.Random(20240611)
    policy = RetryPolicy(backoff_s=1.0, backoff_max_s=30.0, jitter=draws.random)

    for retry, backoff in [(1, 1.0), (3, 4.0), (8, 30.0)]:
        pauses = [policy.pause_s(retry, None) for _ in range(2000)]
        assert all(0.5 * backoff <= pause <= backoff for pause in pauses)
        # Spread over the whole range, not stuck at one end: the jitter is used.
        assert min(pauses) < 0.52 * backoff
        assert max(pauses) > 0.98 * backoff
        assert len(set(pauses)) > 1000


def test_the_default_jitter_stays_in_range() -> None:
    policy = RetryPolicy(backoff_s=4.0)

    pauses = [policy.pause_s(1, None) for _ in range(200)]

    assert all(2.0 <= pause <= 4.0 for pause in pauses)
    assert len(set(pauses)) > 1  # random, not a constant


def test_a_longer_retry_after_wins_over_the_backoff() -> None:
    policy = pinned(FULL, backoff_s=1.0, backoff_max_s=30.0)

    assert policy.pause_s(1, 5.0) == 5.0
    # The provider's ask wins over the cap too: coming back sooner only earns another 429.
    assert policy.pause_s(10, 90.0) == 90.0


def test_a_shorter_retry_after_does_not_shorten_the_pause() -> None:
    policy = pinned(FULL, backoff_s=1.0)

    assert policy.pause_s(3, 0.15) == 4.0
    assert policy.pause_s(1, 0.0) == 1.0


def test_retry_after_is_a_floor_under_the_jittered_pause() -> None:
    policy = pinned(HALF, backoff_s=4.0)

    assert policy.pause_s(1, 3.0) == 3.0  # 2.0 jittered, raised to the ask
    assert policy.pause_s(1, 1.0) == 2.0


# --- may_retry -----------------------------------------------------------------------------------


def test_retries_bound_the_attempts_on_one_model() -> None:
    policy = RetryPolicy(retries=2, window_s=1000.0)

    # Attempts 1 and 2 may be followed by another; after attempt 3 (2 retries) it stops.
    assert [policy.may_retry(attempt, 1.0, 0.0) for attempt in (1, 2, 3, 4)] == [
        True,
        True,
        False,
        False,
    ]


def test_no_retries_means_one_attempt() -> None:
    assert not RetryPolicy(retries=0).may_retry(1, 0.0, 0.0)


@pytest.mark.parametrize(
    ("paused_s", "pause_s", "allowed"),
    [
        pytest.param(0.0, 10.0, True, id="well-inside"),
        pytest.param(110.0, 10.0, True, id="ends-exactly-at-the-window"),
        pytest.param(110.0, 10.5, False, id="would-pass-the-window"),
        pytest.param(0.0, 120.5, False, id="one-pause-longer-than-the-window"),
        pytest.param(120.0, 0.0, True, id="window-used-no-pause"),
        pytest.param(121.0, 0.0, False, id="window-already-passed"),
    ],
)
def test_the_window_bounds_the_pauses(paused_s: float, pause_s: float, allowed: bool) -> None:
    policy = RetryPolicy(retries=10, window_s=120.0)

    assert policy.may_retry(1, pause_s, paused_s) is allowed


def test_a_long_retry_after_is_not_waited_for_past_the_window() -> None:
    # A provider asking for an hour must not hold the call: the next model is tried.
    policy = pinned(FULL, retries=5, backoff_s=1.0, window_s=120.0)

    pause = policy.pause_s(1, 3600.0)

    assert not policy.may_retry(1, pause, 0.0)


def test_both_bounds_must_hold() -> None:
    policy = RetryPolicy(retries=1, window_s=10.0)

    assert policy.may_retry(1, 5.0, 0.0)
    assert not policy.may_retry(2, 5.0, 0.0)  # retries used, window left
    assert not policy.may_retry(1, 5.0, 6.0)  # retries left, window used


def test_a_run_of_retries_stops_at_the_window() -> None:
    """Doubling pauses of 1, 2, 4, ... s within a 10 s window: 1 + 2 + 4 fit, 8 more does not."""
    policy = pinned(FULL, retries=10, backoff_s=1.0, window_s=10.0)
    paused = 0.0
    taken: list[float] = []
    attempt = 1
    while True:
        pause = policy.pause_s(attempt, None)
        if not policy.may_retry(attempt, pause, paused):
            break
        taken.append(pause)
        paused += pause
        attempt += 1

    assert taken == [1.0, 2.0, 4.0]
    assert attempt == 4
