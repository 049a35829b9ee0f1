"""What the daemon's loops report about themselves, for `/healthz`, systemd and `doctor`.

A loop beats while it works; the supervisor marks it dead when it raises
and alive again when it is restarted. Reads take a snapshot under a lock, so
the HTTP server never sees a half-updated record.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

__all__ = ["Health", "LoopStatus"]


@dataclass(frozen=True)
class LoopStatus:
    name: str
    alive: bool = False
    started_at: datetime | None = None
    last_beat: datetime | None = None
    restarts: int = 0
    last_error: str | None = None


@dataclass
class Health:
    """Loop statuses plus free-form facts (last intake poll, Slack connection, ...)."""

    _loops: dict[str, LoopStatus] = field(default_factory=dict)
    _facts: dict[str, object] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def started(self, name: str) -> None:
        now = datetime.now(UTC)
        with self._lock:
            old = self._loops.get(name, LoopStatus(name=name))
            restarts = old.restarts + (1 if old.started_at else 0)
            self._loops[name] = replace(
                old, alive=True, started_at=now, last_beat=now, restarts=restarts
            )

    def beat(self, name: str) -> None:
        with self._lock:
            old = self._loops.get(name, LoopStatus(name=name, alive=True))
            self._loops[name] = replace(old, last_beat=datetime.now(UTC))

    def died(self, name: str, error: str) -> None:
        with self._lock:
            old = self._loops.get(name, LoopStatus(name=name))
            self._loops[name] = replace(old, alive=False, last_error=error)

    def stopped(self, name: str) -> None:
        with self._lock:
            old = self._loops.get(name, LoopStatus(name=name))
            self._loops[name] = replace(old, alive=False)

    def set_fact(self, key: str, value: object) -> None:
        with self._lock:
            self._facts[key] = value

    def loops(self) -> list[LoopStatus]:
        with self._lock:
            return sorted(self._loops.values(), key=lambda status: status.name)

    def facts(self) -> dict[str, object]:
        with self._lock:
            return dict(self._facts)

    def all_alive(self) -> bool:
        with self._lock:
            return all(status.alive for status in self._loops.values())
