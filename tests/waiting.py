"""Waiting on a live daemon in tests: poll a condition, never sleep blind."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["wait_for"]


def wait_for(condition: Callable[[], Any], what: str, timeout_s: float = 60.0) -> Any:
    """Poll `condition` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
