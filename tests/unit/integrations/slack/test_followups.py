"""Follow-ups wait for a lull in the listener's requests, and never longer than their bound."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

from agent_team.integrations.slack.followups import FollowUps, Lull


def test_a_follow_up_runs_only_after_the_requests_in_flight_are_answered() -> None:
    lull = Lull(lull_s=0.02)
    followups = FollowUps(cast(Any, None), workers=1, lull=lull, max_defer_s=30)
    ran = threading.Event()
    try:
        with lull.busy():
            with lull.busy():
                followups.later(ran.set)
            assert not ran.wait(0.2), "one request is still in flight"
            assert lull.in_flight == 1
        assert ran.wait(5), "ran once the last request was answered"
    finally:
        followups.close()


def test_a_steady_stream_of_requests_delays_a_follow_up_but_never_starves_it() -> None:
    lull = Lull(lull_s=0.02)
    followups = FollowUps(cast(Any, None), workers=1, lull=lull, max_defer_s=0.2)
    ran = threading.Event()
    try:
        with lull.busy():
            started = time.monotonic()
            followups.later(ran.set)
            assert ran.wait(5), "ran at its deadline, the request still in flight"
            assert time.monotonic() - started >= 0.15
    finally:
        followups.close()


def test_with_no_request_in_flight_a_follow_up_runs_at_once() -> None:
    followups = FollowUps(cast(Any, None), workers=1, max_defer_s=30)
    ran = threading.Event()
    try:
        followups.later(ran.set)
        assert ran.wait(5)
        assert followups.drain(5)
    finally:
        followups.close()
