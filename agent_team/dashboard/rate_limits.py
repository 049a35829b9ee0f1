"""429 before the expensive parts: the HTTP server's budgets for writes and for secret checks.

Each submit costs model spend and each wrong key is a guess, so both are
counted per minute (`common.rate_limit.SlidingWindow`) and refused with 429
and `Retry-After` before a token is compared, a session verified or a body
read: this middleware sits in front of the read gate and every handler.

- **Writes** (POST, PUT, PATCH, DELETE on the pages, the JSON API and the
  LangGraph API): `AGENT_TEAM_LIMIT_WRITES_PER_MIN` per key. Nothing is
  verified yet, so "the key" is a digest of what the request presents: its
  bearer token or `x-api-key`, else its session cookie, else its client
  address. Presenting someone else's key needs that key, so no one can use
  up another's budget; a made-up key buys a fresh budget and a 401, and the
  401 counts against its address below. Not counted: Slack's and GitHub's
  signed deliveries (the services retry on their own schedule), the LangGraph
  API's thread search (a read sent as a POST), and sign-in itself.
- **Sign-in attempts** (`AGENT_TEAM_LIMIT_LOGINS_PER_MIN` per client
  address): a `POST /login` takes a place before its token is checked and
  gives it back when the token was right, so only failures count and
  parallel guesses cannot slip past; GitHub's way back
  (`GET /login/github/callback`) does the same and keeps its place on any
  refusal (a bad state, a code GitHub refused, a login nobody holds); any
  other request presenting a key (`Authorization`, `x-api-key`) is refused
  while its address is over the budget, and counts when the key was wrong (a
  401). Beginning a GitHub sign-in (`GET /login/github`) stores a state, so
  it counts as a write of its address.

The client address is the one the server reports (`scope["client"]`):
behind a reverse proxy on the same host, uvicorn takes it from
`X-Forwarded-For` (its `FORWARDED_ALLOW_IPS`, loopback by default). An IPv6
address counts by its /64, which one host usually holds whole.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Callable, Collection
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request, cookie_parser
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_team.common.rate_limit import SlidingWindow, retry_after_s
from agent_team.dashboard.auth import GITHUB_CALLBACK_PATH, GITHUB_START_PATH, SESSION_COOKIE
from agent_team.dashboard.rendering import error_page
from agent_team.integrations.langgraph_api.cors import answer_headers

__all__ = ["WRITE_METHODS", "RateLimits", "client_address"]

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SIGN_IN_PATH = "/login"
_NOT_WRITE_PREFIXES = ("/slack/", "/github/")
_NOT_WRITES = frozenset({SIGN_IN_PATH, "/langgraph/threads/search"})
_MAX_ADDRESS_CHARS = 100


def client_address(scope: Scope) -> str:
    """The peer as the server reports it; an IPv6 address as its /64."""
    client = scope.get("client")
    host = str(client[0]) if client else "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:_MAX_ADDRESS_CHARS]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def _digest(secret: str) -> str:
    # The tables hold digests, never a key itself.
    return hashlib.blake2b(secret.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def _presented_key(path: str, headers: Headers) -> str | None:
    """The key a request carries, unchecked: a bearer token, or the LangGraph API's key."""
    if path.startswith("/langgraph/") and headers.get("x-api-key"):
        return headers.get("x-api-key")  # the key it checks, whatever else comes along
    header = headers.get("authorization")
    if header is not None:
        scheme, _, given = header.partition(" ")
        return given.strip() if scheme.lower() == "bearer" and given.strip() else header
    if path.startswith("/langgraph/"):
        return headers.get("x-api-key")
    return None


def _is_write(method: str, path: str) -> bool:
    return (
        method in WRITE_METHODS
        and path not in _NOT_WRITES
        and not path.startswith(_NOT_WRITE_PREFIXES)
    )


class RateLimits:
    """Pure ASGI: refuses over-budget requests first, and watches the statuses of secret checks."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        writes: SlidingWindow,
        sign_ins: SlidingWindow,
        api_origins: Collection[str] = (),
        session_subject: Callable[[str], str | None] = lambda _cookie: None,
    ) -> None:
        """
        Args:
            api_origins: the browser origins the LangGraph API answers (its CORS), so an
                app on one of them can read a 429 and its `Retry-After` too.
            session_subject: whose a session cookie is, from its signature alone (no
                ledger read): every sign-in of one key shares its budget, and a cookie
                that is not ours counts as its address.
        """
        self.session_subject = session_subject
        self.app = app
        self.writes = writes
        self.sign_ins = sign_ins
        self.api_origins = frozenset(origin.rstrip("/") for origin in api_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method: str = scope["method"]
        path: str = scope["path"]
        headers = Headers(scope=scope)
        address = client_address(scope)
        key = _presented_key(path, headers)
        github_back = method == "GET" and path == GITHUB_CALLBACK_PATH
        signing_in = self.sign_ins.enabled and (
            (method == "POST" and path == SIGN_IN_PATH) or github_back
        )
        checks_key = key is not None and self.sign_ins.enabled and not signing_in
        if signing_in:
            wait = self.sign_ins.acquire(address)
        elif checks_key:
            wait = self.sign_ins.peek(address)
        else:
            wait = 0.0
        if wait:
            await self._refused(scope, "sign-in", wait, self.sign_ins.limit)(scope, receive, send)
            return
        if self.writes.enabled and (_is_write(method, path) or path == GITHUB_START_PATH):
            anonymous = path == GITHUB_START_PATH  # a sign-in begins signed out
            writer = "address:" + address if anonymous else self._writer(key, headers, address)
            wait = self.writes.acquire(writer)
            if wait:
                await self._refused(scope, "write", wait, self.writes.limit)(scope, receive, send)
                return
        if not (signing_in or checks_key):
            await self.app(scope, receive, send)
            return
        status = 0

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            # A secret was checked and was not one of ours; GitHub's way back: any refusal.
            wrong = status >= 400 if github_back else status == 401
            if signing_in and not wrong:
                self.sign_ins.release(address)
            elif checks_key and wrong:
                self.sign_ins.record(address)

    def _refused(self, scope: Scope, budget: str, wait_s: float, limit: int) -> Response:
        response = _refused(scope, budget, wait_s, limit)
        origin = Headers(scope=scope).get("origin")
        if scope["path"].startswith("/langgraph/") and origin in self.api_origins:
            response.headers.update(answer_headers(origin))
        return response

    def _writer(self, key: str | None, headers: Headers, address: str) -> str:
        if key is not None:
            return "key:" + _digest(key)
        session = cookie_parser(headers.get("cookie", "")).get(SESSION_COOKIE)
        subject = self.session_subject(session) if session else None
        if subject is not None:
            return "session:" + _digest(subject)
        return "address:" + address


def _refused(scope: Scope, budget: str, wait_s: float, limit: int) -> Response:
    """The 429 in the shape of the surface asked: JSON for the APIs, a page for the pages."""
    seconds = retry_after_s(wait_s)
    if budget == "sign-in":
        heading = "Too many sign-in attempts"
        message = (
            f"more than {limit} failed sign-ins or wrong keys a minute came from your address; "
            f"try again in {seconds} s"
        )
    else:
        heading = "Too many changes"
        message = f"more than {limit} changes a minute came with this key; try again in {seconds} s"
    headers = {"Retry-After": str(seconds), "Cache-Control": "no-store"}
    path: str = scope["path"]
    if path.startswith("/langgraph/"):
        return JSONResponse({"detail": message}, status_code=429, headers=headers)
    if path.startswith("/api/") or path == "/metrics":
        body: dict[str, Any] = {"error": message, "retry_after_s": seconds}
        return JSONResponse(body, status_code=429, headers=headers)
    # The page without "who is signed in": finding out would be the work this saves.
    anonymous = Request({key: value for key, value in scope.items() if key != "app"})
    page = error_page(anonymous, 429, heading, message[0].upper() + message[1:] + ".")
    page.headers.update(headers)
    return page
