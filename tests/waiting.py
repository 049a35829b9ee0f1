"""Waiting on a live daemon in tests: poll a condition, never sleep blind."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["wait_for"]


def wait_for(
    condition: Callable[[], Any],
    what: str = "the condition",
    timeout_s: float = 60.0,
    *,
    step_s: float = 0.02,
) -> Any:
    """Poll `condition` every `step_s` until it returns something truthy, and return that.

    Fails with "timed out waiting for {what}" after `timeout_s`. A condition that
    must stop the wait early (a process that died, a task that failed) raises.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(step_s)
