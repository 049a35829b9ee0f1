"""create_app(): the one Starlette app the daemon serves.

Routes come from small modules (`api`, `pages`) plus whatever the daemon
passes in `extra_routes` (Slack's `/slack/events`, GitHub's `/github/webhook`
in later issues): adding a route is one line in `service/daemon.py`. The
middleware, outermost first: the access log, trusted hosts, security headers,
the rate limits, the read gate.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from agent_team.common.rate_limit import SlidingWindow
from agent_team.dashboard import (
    api,
    api_actions,
    api_automations,
    github_login,
    login,
    pages,
    pages_audit,
    pages_automations,
    pages_inbox,
    pages_new_task,
)
from agent_team.dashboard.access_log import AccessLog
from agent_team.dashboard.context import STATIC_DIR, DashboardContext
from agent_team.dashboard.rate_limits import RateLimits
from agent_team.dashboard.read_gate import ReadGate
from agent_team.dashboard.security_headers import SecurityHeaders
from agent_team.dashboard.trusted_hosts import allowed_hosts

__all__ = ["DashboardContext", "create_app"]


def create_app(ctx: DashboardContext, extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The daemon's HTTP app: API, pages, static files, and the integrations' routes."""
    routes: list[BaseRoute] = [
        *api.routes(ctx),
        *api_actions.routes(ctx),
        *api_automations.routes(ctx),
        *pages.routes(ctx),
        *pages_new_task.routes(ctx),
        *pages_inbox.routes(ctx),
        *pages_automations.routes(ctx),
        *pages_audit.routes(ctx),
        *login.routes(ctx.auth),
        *github_login.routes(ctx),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
        *extra_routes,
    ]
    settings = ctx.settings
    # Outermost first: the access log sees every answer; the limits come before any secret
    # is checked (the read gate, the handlers).
    middleware: list[Middleware] = []
    if settings.access_log:
        middleware.append(Middleware(AccessLog, secrets=ctx.auth.tokens.secrets))
    middleware += [
        Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(settings)),
        Middleware(SecurityHeaders),
    ]
    if settings.limit_writes_per_min or settings.limit_logins_per_min:
        middleware.append(
            Middleware(
                RateLimits,
                writes=SlidingWindow(settings.limit_writes_per_min, clock=ctx.ticks),
                sign_ins=SlidingWindow(settings.limit_logins_per_min, clock=ctx.ticks),
                api_origins=settings.langgraph_api_origins if settings.langgraph_api else (),
                session_subject=ctx.auth.session_subject,
            )
        )
    if settings.reads_need_token:
        middleware.append(Middleware(ReadGate, auth=ctx.auth))
    app = Starlette(routes=routes, middleware=middleware)
    app.state.ctx = ctx
    return app
