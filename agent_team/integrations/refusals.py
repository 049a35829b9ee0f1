"""Refused requests in the log: one bounded line, at most one a source per window.

Why: `/slack/events` and `/github/webhook` are reachable without credentials,
so whatever a refusal logs, anyone can make us log as often as they like.
Bolt logged the whole body of each rejected request (three 900 kB requests
grew the log by 2.7 MB); here a refusal is one line with the reason and the
source, no body, and a source that keeps failing is summed up: the next line
after the window says how many were suppressed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict

__all__ = ["RefusalLog", "outage_reason"]

WINDOW_S = 60.0
_MAX_SOURCES = 1024  # sources remembered at once; the oldest are forgotten first


class RefusalLog:
    """`refused(source, reason)` logs at most one line per source per `window_s`."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        window_s: float = WINDOW_S,
        level: int = logging.WARNING,
    ) -> None:
        """`what` names the requests in each line ("slack request", "github webhook")."""
        self._log = logger
        self._what = what
        self._level = level
        self._window_s = window_s
        self._guard = threading.Lock()
        self._sources: OrderedDict[str, tuple[float, int]] = OrderedDict()  # last, suppressed

    def refused(self, source: str | None, reason: str) -> None:
        who = (source or "unknown")[:64]
        now = time.monotonic()
        with self._guard:
            last, suppressed = self._sources.get(who, (float("-inf"), 0))
            if now - last < self._window_s:
                self._sources[who] = (last, suppressed + 1)
                self._sources.move_to_end(who)
                return
            self._sources[who] = (now, 0)
            self._sources.move_to_end(who)
            while len(self._sources) > _MAX_SOURCES:
                self._sources.popitem(last=False)
        more = f" (and {suppressed} more from it since the last line)" if suppressed else ""
        self._log.log(self._level, "%s refused from %s: %s%s", self._what, who, reason[:200], more)


def outage_reason(exc: BaseException, sender: str) -> str:
    """A refusal's reason when the ledger cannot be written: `sender` delivers it again."""
    return f"the ledger is unavailable ({type(exc).__name__}: {exc}); {sender} delivers it again"
