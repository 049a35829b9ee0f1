"""Hooks the crash and clock tests drive a real process with; never set them in production.

They live apart from `Settings` so that nothing a production operator
configures can turn them on by accident from a TOML file, and so that the
clock every part of a process reads is one injected callable instead of a
method on the settings. `config.load_hooks()` reads them from the
environment (`AGENT_TEAM_CRASH_AT`, `AGENT_TEAM_CLOCK_OFFSET_S`), because the
tests reach a subprocess only through its environment.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["CRASH_EXIT_CODE", "Clock", "Hooks", "crash_if", "wall_clock"]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
CRASH_EXIT_CODE = 137  # what a shell reports for SIGKILL, so crash tests read naturally


def crash_if(crash_at: str | None, point: str) -> None:
    """Die like `kill -9` here when the crash hook (`AGENT_TEAM_CRASH_AT`) names `point`."""
    if crash_at == point:
        log.warning("AGENT_TEAM_CRASH_AT=%s reached; exiting abruptly", crash_at)
        os._exit(CRASH_EXIT_CODE)


def wall_clock() -> datetime:
    """The wall clock in UTC, as every record and deadline is written."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Hooks:
    """`crash_at`: `<phase>:<point>` where a node exits like `kill -9` (code 137);
    `clock_offset_s`: seconds added to the wall clock (a deadline passed, tomorrow's budget).
    """

    crash_at: str | None = None
    clock_offset_s: float = 0.0

    def clock(self) -> Clock:
        """The process's clock: the wall clock, moved by the offset when one is set."""
        if not self.clock_offset_s:
            return wall_clock
        offset = timedelta(seconds=self.clock_offset_s)
        return lambda: datetime.now(UTC) + offset
