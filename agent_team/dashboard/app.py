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
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from agent_team.common.rate_limit import SlidingWindow
from agent_team.dashboard import (
    api,
    api_actions,
    api_automations,
    api_daemons,
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
from agent_team.dashboard.rendering import error_page
from agent_team.dashboard.security_headers import SecurityHeaders
from agent_team.dashboard.trusted_hosts import allowed_hosts

__all__ = ["DashboardContext", "create_app"]


def create_app(ctx: DashboardContext, extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The daemon's HTTP app: API, pages, static files, and the integrations' routes."""
    routes: list[BaseRoute] = [
        *api.routes(ctx),
        *api_actions.routes(ctx),
        *api_automations.routes(ctx),
        *api_daemons.routes(ctx),
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
    app = Starlette(
        routes=[*routes, Route("/favicon.ico", _favicon, methods=["GET"])],
        middleware=middleware,
        exception_handlers={404: _not_here, 405: _not_here},
    )
    app.state.ctx = ctx
    return app


async def _favicon(_request: Request) -> Response:
    """Browsers ask for /favicon.ico whatever the page links; one answer, not a 404 a page."""
    return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")


async def _not_here(request: Request, exc: Exception) -> Response:
    """A path or method nobody serves: JSON for the APIs, the dashboard's own page for people
    (Starlette's default is a bare text line)."""
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    if request.url.path.startswith("/api/"):
        what = "no such endpoint" if status == 404 else f"{request.method} is not allowed here"
        return JSONResponse({"error": what}, status_code=status)
    if status == 405:
        return error_page(request, 405, "Not allowed", f"{request.method} is not allowed here.")
    return error_page(
        request, 404, "Not found", "There is no page here. The task list is on the first page."
    )
