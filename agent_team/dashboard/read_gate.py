"""`AGENT_TEAM_DASHBOARD_READS=token`: reading needs a sign-in too.

Tasks, plans and answers are often a team's private work; on a daemon bound
beyond loopback anyone who reaches the port could read them. With the gate
on, every GET and HEAD needs a session cookie or a bearer token, except what
monitors and the sign-in itself need: `/healthz`, `/readyz`, `/metrics`
(counts only; it asks for its own bearer token when `AGENT_TEAM_METRICS_AUTH`
says so), `/static/`, `/login` (and Sign in with GitHub's `/login/github` and
its callback), the signed webhooks, and `/langgraph/` (its `x-api-key` is a
dashboard token, checked there on every request). A page asked for without a
sign-in goes to `/login` and comes back; the API answers 401.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_team.dashboard.auth import (
    GITHUB_CALLBACK_PATH,
    GITHUB_START_PATH,
    Auth,
    AuthRefused,
    login_path,
    safe_next,
)

__all__ = ["OPEN_PATHS", "ReadGate"]

OPEN_PATHS = (
    "/healthz",
    "/readyz",
    "/metrics",
    "/login",
    "/logout",
    GITHUB_START_PATH,
    GITHUB_CALLBACK_PATH,
)
OPEN_PREFIXES = ("/static/", "/slack/", "/github/", "/langgraph/")  # each checks its own


class ReadGate:
    """Pure ASGI: GET and HEAD requests pass only with a sign-in (writes check their own)."""

    def __init__(self, app: ASGIApp, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            self.auth.authorize_read(request)
        except AuthRefused as refused:
            response: Response
            if path.startswith("/api/"):
                response = JSONResponse(
                    {"error": refused.message}, status_code=refused.status, headers=refused.headers
                )
            else:
                base = scope.get("root_path", "")
                query = scope.get("query_string", b"").decode("latin-1")
                back = safe_next(path + (f"?{query}" if query else ""))
                response = RedirectResponse(login_path(base, back), status_code=303)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
