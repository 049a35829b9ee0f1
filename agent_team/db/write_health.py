"""Whether the ledger takes writes: the last write failure and the last success, per process.

Why it is recorded rather than probed: a ledger on a full disk or a
read-only mount still answers every read, so `/healthz` said `ok` while
every submit and answer failed. The daemon writes on its own every few
seconds (the singleton loops renew their leases), so the outcome of the
latest real write says whether it can write now, without a probe row; the
first write that succeeds after an outage makes it ready again, no restart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from agent_team.common.redact import redact, tail

__all__ = ["WriteFailure", "WriteHealth"]

_T = TypeVar("_T")

_MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class WriteFailure:
    """The last write that failed because of the database, not of what it wrote."""

    at: float  # time.time()
    error: str  # redacted, bounded


class WriteHealth:
    """Thread-safe record of write outcomes; every ledger keeps one."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._last_ok: float | None = None
        self._last_failure: WriteFailure | None = None
        self._failures = 0

    def ok(self) -> None:
        now = time.time()
        with self._guard:
            self._last_ok = now

    def failed(self, error: BaseException | str) -> None:
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        failure = WriteFailure(time.time(), tail(redact(text), _MAX_ERROR_CHARS))
        with self._guard:
            self._last_failure = failure
            self._failures += 1

    @property
    def failures(self) -> int:
        """Write transactions the database refused since the process started."""
        with self._guard:
            return self._failures

    @property
    def last_failure(self) -> WriteFailure | None:
        with self._guard:
            return self._last_failure

    def record(self, write: Callable[[], _T], refused: Callable[[BaseException], bool]) -> _T:
        """Run one write transaction and keep its outcome; `refused` says which errors are
        the database's (away, full, read-only) rather than the write's own."""
        try:
            result = write()
        except Exception as exc:
            if refused(exc):
                self.failed(exc)
            raise
        self.ok()
        return result

    def failing(self) -> WriteFailure | None:
        """The last failure if no write has succeeded since it, else None."""
        with self._guard:
            failure = self._last_failure
            if failure is None or (self._last_ok is not None and self._last_ok >= failure.at):
                return None
            return failure
