"""The sliding-window limiter: exact windows, per-key budgets, bounded memory, no over-admission."""

from __future__ import annotations

import threading

import pytest

from agent_team.common.rate_limit import SlidingWindow, retry_after_s


class Ticks:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_key_gets_its_limit_then_waits_for_the_oldest_to_leave() -> None:
    ticks = Ticks()
    limiter = SlidingWindow(3, 60, clock=ticks)
    assert [limiter.acquire("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    ticks.now += 10
    assert limiter.acquire("a") == pytest.approx(50.0)
    assert limiter.acquire("b") == 0.0, "another key has a budget of its own"
    ticks.now += 50
    assert limiter.acquire("a") == 0.0, "the first three left the window"
    assert limiter.acquire("a") == 0.0
    assert limiter.acquire("a") == 0.0
    assert limiter.acquire("a") > 0


def test_the_window_slides_instead_of_resetting() -> None:
    ticks = Ticks()
    limiter = SlidingWindow(2, 60, clock=ticks)
    limiter.acquire("a")
    ticks.now += 59
    limiter.acquire("a")
    ticks.now += 2  # the first left; the second (2 s old) leaves in 58 s
    assert limiter.acquire("a") == 0.0
    assert limiter.acquire("a") == pytest.approx(58.0)


def test_peek_looks_without_taking_and_record_counts_failures_after_the_fact() -> None:
    limiter = SlidingWindow(2, 60, clock=Ticks())
    assert limiter.peek("a") == 0.0
    assert len(limiter) == 0, "a look stores nothing"
    limiter.record("a")
    limiter.record("a")
    limiter.record("a")  # beyond the limit: still counted, the oldest forgotten
    assert limiter.peek("a") > 0
    assert limiter.acquire("a") > 0


def test_release_gives_a_place_back() -> None:
    limiter = SlidingWindow(1, 60, clock=Ticks())
    assert limiter.acquire("a") == 0.0
    limiter.release("a")
    assert limiter.acquire("a") == 0.0
    assert limiter.acquire("a") > 0
    limiter.release("never-seen")  # nothing to give back: no error


def test_limit_zero_allows_everything_and_stores_nothing() -> None:
    limiter = SlidingWindow(0, 60, clock=Ticks())
    assert not limiter.enabled
    assert all(limiter.acquire("a") == 0.0 for _ in range(1000))
    limiter.record("a")
    assert len(limiter) == 0


def test_idle_keys_are_dropped_and_memory_stays_bounded() -> None:
    ticks = Ticks()
    limiter = SlidingWindow(5, 60, clock=ticks, max_keys=64)
    for n in range(10_000):
        limiter.acquire(f"addr-{n}")
    assert len(limiter) <= 64 + 16, "each stripe keeps at most its share"
    ticks.now += 61
    limiter.acquire("late")
    assert len(limiter) <= 64 + 16
    for n in range(200):  # every stripe sees a new key and drops its idle ones
        limiter.acquire(f"fresh-{n}")
    assert len(limiter) <= 200 + 16


def test_threads_on_one_key_never_get_more_than_the_limit() -> None:
    limiter = SlidingWindow(100, 60, clock=Ticks())
    barrier = threading.Barrier(8)
    granted: list[int] = []

    def hammer() -> None:
        barrier.wait()
        granted.append(sum(limiter.acquire("shared") == 0.0 for _ in range(1000)))

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == 100


@pytest.mark.parametrize(("wait", "header"), [(0.001, 1), (1.0, 1), (1.2, 2), (59.9, 60)])
def test_retry_after_is_whole_seconds_never_zero(wait: float, header: int) -> None:
    assert retry_after_s(wait) == header


def test_nonsense_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        SlidingWindow(-1)
    with pytest.raises(ValueError):
        SlidingWindow(1, 0)
