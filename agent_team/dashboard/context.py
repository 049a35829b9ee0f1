"""What every dashboard handler shares: the settings, the ledger views, sign-in, the worker.

Apart from `app` (which mounts every route module) so the route modules can take
the context without importing the app that imports them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from agent_team import db
from agent_team.config import Settings
from agent_team.dashboard.auth import Auth
from agent_team.health.status import Health
from agent_team.requests.task_requests import TaskRequests

if TYPE_CHECKING:
    from agent_team.coordinator import Coordinator

__all__ = ["STATIC_DIR", "DashboardContext"]

STATIC_DIR = Path(__file__).parent / "static"


@dataclass
class DashboardContext:
    """What the HTTP handlers may use: one ledger view per request (`read`, `write`)."""

    settings: Settings
    health: Health = field(default_factory=Health)
    coordinator: Coordinator | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    # What the rate limits count seconds with: monotonic, so a clock step never opens or
    # shuts a window (tests stop it).
    ticks: Callable[[], float] = time.monotonic
    auth: Auth = field(init=False, repr=False)

    def __post_init__(self) -> None:
        """The tokens are resolved here, so a bad tokens file stops the start (ConfigError)."""
        self.auth = Auth(self.settings, keys=self.read, touch=self._touch_key)

    def _touch_key(self, key_id: str) -> None:
        with self.write() as ledger:
            db.touch_key(ledger, key_id, self.clock())

    @contextmanager
    def read(self) -> Iterator[db.Reader]:
        """One consistent view of the ledger for one request; writers are never blocked by it.

        Outside the daemon the file is opened read-only, so a read never creates it.
        """
        if self.coordinator is not None:
            with self.coordinator.ledger.snapshot() as view:
                yield view
            return
        target = self.settings.ledger_target
        with db.open_ledger(target, readonly=True) as ledger, ledger.snapshot() as view:
            yield view

    @contextmanager
    def write(self) -> Iterator[db.Ledger]:
        """The coordinator's ledger when in the daemon, else one opened for this request."""
        if self.coordinator is not None:
            yield self.coordinator.ledger
            return
        with db.open_ledger(self.settings.ledger_target) as ledger:
            yield ledger

    @contextmanager
    def requests(self) -> Iterator[TaskRequests]:
        """The one request path: the coordinator's in the daemon (it wakes the worker), else
        one on a ledger opened for this request (the daemon polling it picks the work up)."""
        if self.coordinator is not None:
            yield self.coordinator.requests
            return
        with self.write() as ledger:
            yield TaskRequests.of(ledger, self.settings, clock=self.clock)
