"""Cross-origin calls from the browser apps an operator lists (Agent Inbox runs on its own origin).

Only origins in `AGENT_TEAM_LANGGRAPH_API_ORIGINS` get CORS headers; a
preflight from any other origin is refused and carries none, so a page on
another site cannot read or answer through a visitor's browser. No cookies
are involved (the key travels in `x-api-key`), so credentials are never
allowed.
"""

from __future__ import annotations

from collections.abc import Collection

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ALLOWED_METHODS", "Cors", "answer_headers"]

ALLOWED_METHODS = "GET, POST, OPTIONS"
# What the SDKs and the Inbox send; a header outside this list fails the preflight.
ALLOWED_HEADERS = (
    "accept",
    "authorization",
    "cache-control",
    "content-type",
    "last-event-id",
    "x-api-key",
    "x-auth-scheme",
    "x-request-id",
)
EXPOSED_HEADERS = "content-location, location, retry-after"
MAX_AGE_S = "600"


def answer_headers(origin: str) -> dict[str, str]:
    """The headers that let an allowed origin read an answer (the server's 429 too, which
    is sent before this middleware is reached)."""
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Expose-Headers": EXPOSED_HEADERS,
        "Vary": "Origin",
    }


class Cors:
    """Pure ASGI, so a streamed run (`text/event-stream`) gets its headers without buffering."""

    def __init__(self, app: ASGIApp, origins: Collection[str]) -> None:
        self.app = app
        self.origins = frozenset(origin.rstrip("/") for origin in origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        preflight = scope["method"] == "OPTIONS" and "access-control-request-method" in headers
        if preflight:
            await self._preflight(origin, headers)(scope, receive, send)
            return
        if origin is None or origin not in self.origins:
            await self.app(scope, receive, send)
            return

        async def with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                out = MutableHeaders(scope=message)
                for name, value in answer_headers(origin).items():
                    if name == "Vary":
                        out.add_vary_header(value)
                    else:
                        out[name] = value
            await send(message)

        await self.app(scope, receive, with_cors)

    def _preflight(self, origin: str | None, headers: Headers) -> Response:
        if origin is None or origin not in self.origins:
            return JSONResponse(
                {"detail": "this origin may not call the API (AGENT_TEAM_LANGGRAPH_API_ORIGINS)"},
                status_code=403,
                headers={"Vary": "Origin"},
            )
        method = headers["access-control-request-method"].upper()
        asked = [
            name.strip().lower()
            for name in headers.get("access-control-request-headers", "").split(",")
            if name.strip()
        ]
        refused = [name for name in asked if name not in ALLOWED_HEADERS]
        if method not in ("GET", "POST") or refused:
            what = f"method {method}" if method not in ("GET", "POST") else f"header {refused[0]}"
            return JSONResponse(
                {"detail": f"{what[:80]} is not allowed"},
                status_code=400,
                headers={"Vary": "Origin"},
            )
        allowed = {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": ALLOWED_METHODS,
            "Access-Control-Allow-Headers": ", ".join(ALLOWED_HEADERS),
            "Access-Control-Max-Age": MAX_AGE_S,
            "Vary": "Origin",
        }
        if headers.get("access-control-request-private-network") == "true":
            # Chrome asks before a public page calls a private address (Private Network Access);
            # the origin is one the operator listed, so it may.
            allowed["Access-Control-Allow-Private-Network"] = "true"
        return Response(status_code=204, headers=allowed)
