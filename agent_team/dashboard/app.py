"""create_app(): the one Starlette app the daemon serves.

Routes come from small modules (`api`, `pages`) plus whatever the daemon
passes in `extra_routes` (Slack's `/slack/events`, GitHub's `/github/webhook`
in later issues): adding a route is one line in `service/daemon.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from agent_team.dashboard import api, api_automations, login, pages, pages_automations
from agent_team.dashboard.context import STATIC_DIR, DashboardContext
from agent_team.dashboard.read_gate import ReadGate
from agent_team.dashboard.security_headers import SecurityHeaders
from agent_team.dashboard.trusted_hosts import allowed_hosts

__all__ = ["DashboardContext", "create_app"]


def create_app(ctx: DashboardContext, extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The daemon's HTTP app: API, pages, static files, and the integrations' routes."""
    routes: list[BaseRoute] = [
        *api.routes(ctx),
        *api_automations.routes(ctx),
        *pages.routes(ctx),
        *pages_automations.routes(ctx),
        *login.routes(ctx.auth),
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
