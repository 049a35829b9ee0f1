"""create_app(): the one Starlette app the daemon serves.

Routes come from small modules (`api`, `pages`) plus whatever the daemon
passes in `extra_routes` (Slack's `/slack/events`, GitHub's `/github/webhook`
in later issues): adding a route is one line in `daemon.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from agent_team import db
from agent_team.config import Settings
from agent_team.dashboard.read_gate import ReadGate
from agent_team.dashboard.security_headers import SecurityHeaders
from agent_team.dashboard.trusted_hosts import allowed_hosts
from agent_team.health.status import Health

if TYPE_CHECKING:
    from agent_team.coordinator import Coordinator
    from agent_team.dashboard.auth import Auth

__all__ = ["DashboardContext", "create_app"]

STATIC_DIR = Path(__file__).parent / "static"


@dataclass
class DashboardContext:
    """What the HTTP handlers may use: one ledger view per request (`read`, `write`)."""

    settings: Settings
    health: Health = field(default_factory=Health)
    coordinator: Coordinator | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    auth: Auth = field(init=False, repr=False)

    def __post_init__(self) -> None:
        """The tokens are resolved here, so a bad tokens file stops the start (ConfigError)."""
        from agent_team.dashboard.auth import Auth

        self.auth = Auth(self.settings)

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

    def wake(self) -> None:
        if self.coordinator is not None:
            self.coordinator.wake.set()


def create_app(ctx: DashboardContext, extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The daemon's HTTP app: API, pages, static files, and the integrations' routes."""
    from agent_team.dashboard import api, api_automations, auth, pages, pages_automations

    routes: list[BaseRoute] = [
        *api.routes(ctx),
        *api_automations.routes(ctx),
        *pages.routes(ctx),
        *pages_automations.routes(ctx),
        *auth.routes(ctx.auth),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
        *extra_routes,
    ]
    middleware = [
        Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(ctx.settings)),
        Middleware(SecurityHeaders),
    ]
    if ctx.settings.reads_need_token:
        middleware.append(Middleware(ReadGate, auth=ctx.auth))
    app = Starlette(routes=routes, middleware=middleware)
    app.state.ctx = ctx
    return app
