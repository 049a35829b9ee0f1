"""The sign-in page and its two form posts: `GET/POST /login` and `POST /logout`.

Apart from `auth` (tokens, sessions, CSRF), which every handler and the read
gate use, because these pages render templates and `auth` must not import the
renderer that shows who is signed in.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_team.dashboard.auth import (
    CSRF_FIELD,
    LOGIN_CSRF_COOKIE,
    SESSION_COOKIE,
    TOKENS_HINT,
    Auth,
    AuthRefused,
    check_csrf,
    read_form,
    redirect,
    safe_next,
)
from agent_team.dashboard.rendering import render_page

__all__ = ["routes"]

log = logging.getLogger(__name__)

_LOGIN_CSRF_S = 3600


class _LoginPages:
    """The sign-in page and its two form posts."""

    def __init__(self, auth: Auth) -> None:
        self.auth = auth

    def _set(
        self, request: Request, response: Response, name: str, value: str, max_age: int
    ) -> None:
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path="/",
            secure=self.auth.secure_cookies(request),
            httponly=True,
            samesite="strict",
        )

    def _clear(self, request: Request, response: Response, name: str) -> None:
        secure = self.auth.secure_cookies(request)
        response.delete_cookie(name, path="/", secure=secure, httponly=True, samesite="strict")

    def _page(
        self, request: Request, *, next_path: str, error: str | None = None, status_code: int = 200
    ) -> Response:
        # Double-submit: the same random value in a SameSite=Strict cookie and in the form.
        # A page on another site can post the form but cannot send (or read) the cookie.
        login_csrf = request.cookies.get(LOGIN_CSRF_COOKIE, "")
        if len(login_csrf) < 32 or not login_csrf.isascii():
            login_csrf = secrets.token_urlsafe(32)
        base = str(request.scope.get("root_path", "")).rstrip("/")
        response = render_page(
            request,
            "login.html",
            {
                "next_path": next_path,
                "login_csrf": login_csrf,
                "error": error,
                "token_sign_in": self.auth.tokens.enabled,
                "github_href": (
                    f"{base}/login/github?next={quote(next_path, safe='/')}"
                    if self.auth.github_on
                    else None
                ),
                "github_joins_as": self.auth.settings.github_signin_default_role,
                "hint": TOKENS_HINT,
            },
            status_code=status_code,
        )
        self._set(request, response, LOGIN_CSRF_COOKIE, login_csrf, _LOGIN_CSRF_S)
        return response

    async def show(self, request: Request) -> Response:
        return self._page(request, next_path=safe_next(request.query_params.get("next")))

    async def sign_in(self, request: Request) -> Response:
        try:
            form = await read_form(request)
        except AuthRefused as exc:
            return _error(request, exc.status, "Not signed in", exc.message)
        next_path = safe_next(form.get("next"))
        if not self.auth.tokens.enabled:
            return self._page(
                request,
                next_path=next_path,
                error=f"{'Signing in with a token' if self.auth.github_on else 'Sign-in'} is "
                f"off: no dashboard token is configured; {TOKENS_HINT}.",
                status_code=403,
            )
        expected = request.cookies.get(LOGIN_CSRF_COOKIE, "")
        given = form.get("login_csrf", "")
        if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
            return self._page(
                request,
                next_path=next_path,
                error="CSRF check failed: the sign-in form was not this page's (or it is an "
                "hour old). Try again on this page.",
                status_code=403,
            )
        token = self.auth.tokens.match(form.get("token", "").strip())
        if token is None:
            return self._page(
                request,
                next_path=next_path,
                error="That is not one of the dashboard's tokens. Ask the operator for yours.",
                status_code=401,
            )
        log.info("dashboard: %s signed in", token.name or "the unnamed token")
        base = str(request.scope.get("root_path", "")).rstrip("/")
        response = redirect(base + next_path)
        self._set(
            request, response, SESSION_COOKIE, self.auth.session_cookie(token), self.auth.max_age_s
        )
        self._clear(request, response, LOGIN_CSRF_COOKIE)
        return response

    async def sign_out(self, request: Request) -> Response:
        try:
            form = await read_form(request)
            viewer = self.auth.viewer(request)
            if viewer is not None:
                check_csrf(viewer, form.get(CSRF_FIELD))
        except AuthRefused as exc:
            return _error(request, exc.status, "Not signed out", exc.message)
        base = str(request.scope.get("root_path", "")).rstrip("/")
        response = redirect(f"{base}/")
        self._clear(request, response, SESSION_COOKIE)
        return response


def _error(request: Request, status_code: int, heading: str, message: str) -> Response:
    context = {"status_code": status_code, "heading": heading, "message": message}
    return render_page(request, "error.html", context, status_code=status_code)


def routes(auth: Auth) -> list[BaseRoute]:
    """`GET/POST /login` and `POST /logout`."""
    pages = _LoginPages(auth)
    return [
        Route("/login", pages.show, methods=["GET"], name="login"),
        Route("/login", pages.sign_in, methods=["POST"]),
        Route("/logout", pages.sign_out, methods=["POST"], name="logout"),
    ]
