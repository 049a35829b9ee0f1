"""Sign in with GitHub: `GET /login/github` and GitHub's way back, `/login/github/callback`.

Mounted only when the OAuth app is configured (`Settings.github_sign_in`).

- `/login/github?next=/path` issues a one-time state (the ledger keeps its
  hash for 10 minutes, `requests.github_signin`), puts the same state in a
  cookie on this browser, and sends the browser to GitHub's authorize page.
- `/login/github/callback?code&state` signs a person in only when the state
  is this browser's (the cookie: no other site can finish a sign-in in your
  browser, "login CSRF"), is live in the ledger and is spent now (one
  compare-and-set: a replay fails on any daemon), GitHub exchanges the code,
  its user endpoint names a login, and a person holds that login. Anything
  else is a page with the reason (400; 403 for a login nobody holds), with
  nobody signed in and no person stored.

The state cookie is `SameSite=Lax`, not `Strict` like the session: GitHub sends
the browser back from its own site, and a `Strict` cookie would stay behind.
For the same reason the signed-in answer is a page that moves on by itself
(`<meta http-equiv="refresh">`) rather than a 303: the session cookie is
`Strict`, and a browser leaves it off a redirect that began on GitHub's site,
so the next page would look signed out; a navigation from our own page carries it.
"""

from __future__ import annotations

import hmac
import logging

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_team import db
from agent_team.dashboard.auth import (
    GITHUB_CALLBACK_PATH,
    GITHUB_START_PATH,
    LOGIN_CSRF_COOKIE,
    SESSION_COOKIE,
    note_who,
    redirect,
    safe_next,
)
from agent_team.dashboard.context import DashboardContext
from agent_team.dashboard.github_oauth import GitHubOAuth
from agent_team.dashboard.pages import failure_page
from agent_team.dashboard.rendering import render_page
from agent_team.exceptions import LedgerError, SignInRefusedError
from agent_team.requests.github_signin import GitHubSignIns

__all__ = ["STATE_COOKIE", "routes"]

log = logging.getLogger(__name__)

STATE_COOKIE = "agent_team_github_state"
_MAX_PARAM_CHARS = 512


class _GitHubLogin:
    """The two routes; the ledger through `ctx.write` (the coordinator's, in the daemon), so
    the state is the same one on every daemon of the ledger."""

    def __init__(self, ctx: DashboardContext, oauth: GitHubOAuth) -> None:
        self.ctx = ctx
        self.oauth = oauth

    def _sign_ins(self, ledger: db.Ledger) -> GitHubSignIns:
        return GitHubSignIns(
            ledger,
            default_role=self.ctx.settings.github_signin_default_role,
            clock=self.ctx.clock,
        )

    def _callback_url(self, request: Request) -> str:
        """What GitHub sends the browser back to: under the dashboard's public URL if set."""
        configured = self.ctx.settings.dashboard_url
        base = configured.rstrip("/") if configured else str(request.base_url).rstrip("/")
        return base + GITHUB_CALLBACK_PATH

    def _cookie_path(self, request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/") + GITHUB_START_PATH

    async def start(self, request: Request) -> Response:
        next_path = safe_next(request.query_params.get("next"))

        def begin() -> str:
            with self.ctx.write() as ledger:
                return self._sign_ins(ledger).begin(next_path)

        try:
            state = await run_in_threadpool(begin)
        except LedgerError as exc:
            return failure_page(request, exc)
        url = self.oauth.authorize_url(state=state, redirect_uri=self._callback_url(request))
        response = redirect(url)
        response.set_cookie(
            STATE_COOKIE,
            state,
            max_age=int(db.OAUTH_STATE_LIFETIME.total_seconds()),
            path=self._cookie_path(request),
            secure=self.ctx.auth.secure_cookies(request),
            httponly=True,
            samesite="lax",
        )
        return response

    async def callback(self, request: Request) -> Response:
        try:
            next_path, person = await self._sign_in(request)
        except SignInRefusedError as exc:
            log.info("dashboard: a GitHub sign-in was refused: %s", exc)
            response = render_page(
                request,
                "error.html",
                {
                    "status_code": exc.status,
                    "heading": "Not signed in",
                    "message": str(exc)[0].upper() + str(exc)[1:] + ".",
                    "again_href": self._base(request) + "/login",
                },
                status_code=exc.status,
            )
            self._forget_state(request, response)
            return response
        except LedgerError as exc:
            return failure_page(request, exc)
        found, login = person
        name = found.name
        log.info("dashboard: %s signed in with GitHub (%s)", name, login)
        note_who(request.scope, name)
        target = self._base(request) + next_path
        response = render_page(
            request, "signed_in.html", {"target": target, "who": name}, status_code=200
        )
        auth = self.ctx.auth
        secure = auth.secure_cookies(request)
        response.set_cookie(
            SESSION_COOKIE,
            auth.person_session_cookie(found, login),
            max_age=auth.max_age_s,
            path="/",
            secure=secure,
            httponly=True,
            samesite="strict",
        )
        response.delete_cookie(
            LOGIN_CSRF_COOKIE, path="/", secure=secure, httponly=True, samesite="strict"
        )
        self._forget_state(request, response)
        return response

    async def _sign_in(self, request: Request) -> tuple[str, tuple[db.Person, str]]:
        """(where to go, (the person, their login)); else SignInRefusedError."""
        query = request.query_params
        state = query.get("state", "")[:_MAX_PARAM_CHARS]
        cookie = request.cookies.get(STATE_COOKIE, "")
        if not cookie:
            raise SignInRefusedError(
                "this browser did not begin that sign-in (its sign-in cookie is missing: "
                "another browser, or more than 10 minutes ago); start again"
            )
        if not hmac.compare_digest(state.encode("utf-8"), cookie.encode("utf-8")):
            raise SignInRefusedError(
                "the state GitHub sent back is not the one this browser was given (a forged "
                "or crossed sign-in); start again"
            )

        def spend() -> str:
            with self.ctx.write() as ledger:
                return self._sign_ins(ledger).spend(state)

        next_path = await run_in_threadpool(spend)
        error = query.get("error")
        if error is not None:
            raise SignInRefusedError(self.oauth.authorize_refusal(error[:_MAX_PARAM_CHARS]))
        code = query.get("code", "")
        if not code or len(code) > _MAX_PARAM_CHARS:
            raise SignInRefusedError("GitHub's answer carries no sign-in code; start again")
        login = await self.oauth.login_of(code, redirect_uri=self._callback_url(request))

        def person() -> tuple[db.Person, str]:
            with self.ctx.write() as ledger:
                found = self._sign_ins(ledger).person_for(login)
            return found, login

        return next_path, await run_in_threadpool(person)

    def _forget_state(self, request: Request, response: Response) -> None:
        response.delete_cookie(
            STATE_COOKIE,
            path=self._cookie_path(request),
            secure=self.ctx.auth.secure_cookies(request),
            httponly=True,
            samesite="lax",
        )

    @staticmethod
    def _base(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")


def routes(ctx: DashboardContext, oauth: GitHubOAuth | None = None) -> list[BaseRoute]:
    """`GET /login/github` and its callback; none when Sign in with GitHub is off.

    Args:
        oauth: the OAuth client (tests pass one with a transport); default: the settings'.
    """
    client = oauth or GitHubOAuth.from_settings(ctx.settings)
    if client is None or not ctx.auth.github_on:
        return []
    pages = _GitHubLogin(ctx, client)
    return [
        Route(GITHUB_START_PATH, pages.start, methods=["GET"], name="login_github"),
        Route(GITHUB_CALLBACK_PATH, pages.callback, methods=["GET"], name="login_github_callback"),
    ]
