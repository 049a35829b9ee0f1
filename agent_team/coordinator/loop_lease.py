"""Loops that must run on one instance at a time: deadlines, budget unparking, pruning, polls.

Several daemons on one PostgreSQL database (or `agent-team tick` beside a
daemon on SQLite) each run these loops, but a pass should be made by one of
them: two GitHub pollers spend the rate limit twice, two reminder timers may
both remind. Each such loop asks its `LoopLease` before every pass; the lease
(`loop:<name>` in the leases table) goes to whoever asks first and stays with
it while it keeps asking. Held for the loop's interval plus `lease_s`, it
moves to another instance that long after its holder dies, and at once when
the holder stops cleanly (`release`). The passes stay idempotent
compare-and-sets, so the rare overlap at a hand-over changes nothing twice.
"""

from __future__ import annotations

import logging
import threading

from agent_team import db
from agent_team.common.redact import redact
from agent_team.exceptions import LedgerError

__all__ = ["LoopLease"]

log = logging.getLogger(__name__)


class LoopLease:
    """Whether this instance makes the next pass of one loop."""

    def __init__(
        self, ledger: db.Ledger, loop: str, *, owner: str, every_s: float, lease_s: float
    ) -> None:
        self.ledger = ledger
        self.loop = loop
        self.name = f"loop:{loop}"
        self.owner = owner
        self.hold_s = every_s + lease_s
        self._fence: db.Fence | None = None
        self._guard = threading.Lock()

    @property
    def held(self) -> bool:
        with self._guard:
            return self._fence is not None

    def turn(self) -> bool:
        """Take or renew the lease for the next `hold_s`; True if this instance makes the pass.

        A ledger that cannot be reached says no (the pass waits for the next turn).
        """
        try:
            fence = db.acquire_lease(
                self.ledger, name=self.name, owner=self.owner, lease_s=self.hold_s
            )
        except LedgerError as exc:
            log.warning("loop %s: cannot reach the lease: %s", self.loop, redact(str(exc)))
            fence = None
        with self._guard:
            before, self._fence = self._fence, fence
        if (before is None) != (fence is None):
            if fence is not None:
                log.info("loop %s runs on this instance now (epoch %d)", self.loop, fence.epoch)
            else:
                log.info("loop %s runs on another instance now", self.loop)
        return fence is not None

    def release(self) -> None:
        """Hand the loop over at once (a clean stop); the next instance to ask takes it."""
        with self._guard:
            fence, self._fence = self._fence, None
        if fence is None:
            return
        try:
            db.release_lease(self.ledger, fence)
        except LedgerError as exc:  # it lapses by itself after hold_s
            log.warning("loop %s: could not release its lease: %s", self.loop, redact(str(exc)))
