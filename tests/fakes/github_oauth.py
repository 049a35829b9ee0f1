"""A loopback GitHub for Sign in with GitHub: the OAuth app web flow and `GET /user`.

A real HTTP server on 127.0.0.1 (ephemeral port) in a thread, speaking
GitHub's documented wire format (docs.github.com, "Authorizing OAuth apps";
"Troubleshooting OAuth app access token request errors"), the way GitHub
Enterprise serves it: the web flow and the REST API on one host.

- `GET /login/oauth/authorize?client_id&redirect_uri&state&scope`: an unknown
  client id is a 404 page; a `redirect_uri` outside the app's registered
  callback URL is GitHub's `redirect_uri_mismatch` error page. Then, as the
  account the browser is signed in to GitHub with (`signed_in_as`), either
  straight back to `redirect_uri?code=..&state=..` (`approval="auto"`, as
  GitHub does for an app the account authorized before) or an authorize page
  with **Authorize** and **Cancel** (`approval="page"`); Cancel goes back with
  `error=access_denied&error_description=..&error_uri=..&state=..`.
- `POST /login/oauth/access_token` (form or JSON: client_id, client_secret,
  code, redirect_uri): `{"access_token", "token_type": "bearer", "scope"}`, or,
  with HTTP 200 as GitHub answers, `{"error", "error_description",
  "error_uri"}`: `incorrect_client_credentials`, `bad_verification_code` (an
  unknown, used or 10-minute-old code; a code works once), and
  `redirect_uri_mismatch`. Form-encoded instead of JSON without
  `Accept: application/json`.
- `GET /user` (also `/api/v3/user`, GitHub Enterprise's API path) with
  `Authorization: Bearer <token>` (or `token <token>`): the account; 401
  `Bad credentials` otherwise.

Test-side: `fail(path, status, body)` makes a path answer that until `heal`;
every request is recorded (`requests`), and `codes` / `tokens` hold what was
issued, so a test can look for them where they must never appear.
"""

from __future__ import annotations

import html
import json
import secrets
import string
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.fakes.http_body import read_body
from tests.fakes.loopback import LoopbackServer

__all__ = ["CODE_LIFETIME_S", "FakeGitHubOAuth", "Recorded"]

CODE_LIFETIME_S = 600.0
_DOCS = "https://docs.github.com/apps/managing-oauth-apps"


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: str


@dataclass
class _Code:
    login: str
    redirect_uri: str
    scope: str
    issued_at: float
    used: bool = False


class FakeGitHubOAuth:
    """`with FakeGitHubOAuth(client_id=..., client_secret=...) as gh:`; the web host and the
    API are both `gh.url` (`gh.api_url` for GitHub Enterprise's `/api/v3`)."""

    def __init__(
        self,
        *,
        client_id: str,
        client_secret: str,
        callback_url: str | None = None,
        signed_in_as: str = "octocat",
        approval: Literal["auto", "page"] = "auto",
        host: str = "127.0.0.1",
    ) -> None:
        """Args:
        callback_url: the app's registered callback URL (None: any redirect_uri is taken).
        host: the name the URLs use; `localhost` makes the fake another site than a
            dashboard on 127.0.0.1 in a browser's eyes (as github.com is).
        """
        self.client_id = client_id
        self.client_secret = client_secret
        self.callback_url = callback_url
        self.signed_in_as = signed_in_as
        self.approval = approval
        self.host = host
        self.users: dict[str, int] = {}
        self.codes: dict[str, _Code] = {}
        self.tokens: dict[str, str] = {}  # access token -> login
        self.requests: list[Recorded] = []
        self.failures: dict[str, tuple[int, bytes, str]] = {}
        self.lock = threading.Lock()
        self.clock = time.monotonic
        self._loopback = LoopbackServer(self._handler())

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._loopback.port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/v3"

    def __enter__(self) -> FakeGitHubOAuth:
        self._loopback.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._loopback.stop()

    # -- the test's side ---------------------------------------------------------------------

    def fail(
        self, path: str, status: int, body: bytes, content_type: str = "application/json"
    ) -> None:
        """Answer every request to `path` with this until `heal(path)`."""
        with self.lock:
            self.failures[path] = (status, body, content_type)

    def heal(self, path: str) -> None:
        with self.lock:
            self.failures.pop(path, None)

    def seen(self, method: str, path: str) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.method == method and r.path == path]

    def user_json(self, login: str) -> dict[str, Any]:
        with self.lock:
            user_id = self.users.setdefault(login.lower(), 1000 + len(self.users))
        return {
            "login": login,
            "id": user_id,
            "node_id": f"U_{user_id}",
            "type": "User",
            "site_admin": False,
            "name": login.title(),
            "html_url": f"{self.url}/{login}",
            "url": f"{self.api_url}/users/{login}",
        }

    # -- the flow ----------------------------------------------------------------------------

    def _redirect_ok(self, redirect_uri: str) -> bool:
        """GitHub's rule: same host and port as the callback URL, its path a subpath of it."""
        if self.callback_url is None:
            return True
        want, got = urlsplit(self.callback_url), urlsplit(redirect_uri)
        return (got.scheme, got.netloc) == (want.scheme, want.netloc) and (
            got.path + "/"
        ).startswith(want.path.rstrip("/") + "/")

    def _issue_code(self, redirect_uri: str, scope: str) -> str:
        code = secrets.token_hex(10)
        with self.lock:
            self.codes[code] = _Code(self.signed_in_as, redirect_uri, scope, self.clock())
        return code

    def _back(self, redirect_uri: str, params: dict[str, str]) -> str:
        joiner = "&" if urlsplit(redirect_uri).query else "?"
        return f"{redirect_uri}{joiner}{urlencode(params)}"

    def _authorize(
        self, query: dict[str, str], *, decided: str | None
    ) -> tuple[int, bytes, dict[str, str]]:
        if query.get("client_id") != self.client_id:
            return 404, b"<h1>404</h1><p>Not Found</p>", {"Content-Type": "text/html"}
        redirect_uri = query.get("redirect_uri") or self.callback_url or ""
        state = query.get("state", "")
        if not self._redirect_ok(redirect_uri):
            page = b"<h1>The redirect_uri is not associated with this application.</h1>"
            return 400, page, {"Content-Type": "text/html"}
        if self.approval == "page" and decided is None:
            return 200, self._authorize_page(query).encode(), {"Content-Type": "text/html"}
        if decided == "cancel":
            params = {
                "error": "access_denied",
                "error_description": "The user has denied your application access.",
                "error_uri": f"{_DOCS}/troubleshooting-authorization-request-errors/#access-denied",
                "state": state,
            }
            return 302, b"", {"Location": self._back(redirect_uri, params)}
        code = self._issue_code(redirect_uri, query.get("scope", ""))
        return 302, b"", {"Location": self._back(redirect_uri, {"code": code, "state": state})}

    def _authorize_page(self, query: dict[str, str]) -> str:
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
            for k, v in query.items()
        )
        who = html.escape(self.signed_in_as)
        return (
            "<!doctype html><title>Authorize application</title>"
            f"<h1>Authorize agent-team</h1><p>Signed in to GitHub as <b>{who}</b>.</p>"
            f'<form method="post" action="/login/oauth/authorize">{hidden}'
            '<button name="decision" value="authorize">Authorize</button>'
            '<button name="decision" value="cancel">Cancel</button></form>'
        )

    def _token_error(self, error: str, description: str) -> dict[str, str]:
        return {
            "error": error,
            "error_description": description,
            "error_uri": f"{_DOCS}/troubleshooting-oauth-app-access-token-request-errors/",
        }

    def _access_token(self, form: dict[str, str]) -> dict[str, str]:
        if (
            form.get("client_id") != self.client_id
            or form.get("client_secret") != self.client_secret
        ):
            return self._token_error(
                "incorrect_client_credentials",
                "The client_id and/or client_secret passed are incorrect.",
            )
        with self.lock:
            found = self.codes.get(form.get("code", ""))
            fresh = (
                found is not None
                and not found.used
                and self.clock() - found.issued_at < CODE_LIFETIME_S
            )
            if found is not None:
                found.used = True  # a code works once, whatever came of it
        if found is None or not fresh:
            return self._token_error(
                "bad_verification_code", "The code passed is incorrect or expired."
            )
        if form.get("redirect_uri") and form["redirect_uri"] != found.redirect_uri:
            return self._token_error(
                "redirect_uri_mismatch",
                "The redirect_uri MUST match the registered callback URL for this application.",
            )
        alphabet = string.ascii_letters + string.digits
        token = "gho_" + "".join(secrets.choice(alphabet) for _ in range(36))
        with self.lock:
            self.tokens[token] = found.login
        return {"access_token": token, "token_type": "bearer", "scope": found.scope}

    def _user(self, authorization: str) -> tuple[int, dict[str, Any]]:
        scheme, _, token = authorization.partition(" ")
        with self.lock:
            login = (
                self.tokens.get(token.strip()) if scheme.lower() in ("bearer", "token") else None
            )
        if login is None:
            return 401, {
                "message": "Bad credentials",
                "documentation_url": "https://docs.github.com/rest",
            }
        return 200, self.user_json(login)

    # -- HTTP --------------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _serve(self, method: str) -> None:
                parts = urlsplit(self.path)
                body = read_body(self).decode("utf-8", "replace")
                query_lists = parse_qs(parts.query)
                with fake.lock:
                    fake.requests.append(
                        Recorded(method, parts.path, query_lists, dict(self.headers.items()), body)
                    )
                    failure = fake.failures.get(parts.path)
                if failure is not None:
                    status, raw, content_type = failure
                    self._send(status, raw, {"Content-Type": content_type})
                    return
                query = {k: v[0] for k, v in query_lists.items()}
                path = parts.path
                if path == "/login/oauth/authorize" and method == "GET":
                    self._send(*fake._authorize(query, decided=None))
                elif path == "/login/oauth/authorize" and method == "POST":
                    form = {k: v[0] for k, v in parse_qs(body).items()}
                    decision = form.pop("decision", "cancel")
                    self._send(*fake._authorize(form, decided=decision))
                elif path == "/login/oauth/access_token" and method == "POST":
                    if self.headers.get("content-type", "").startswith("application/json"):
                        form = {k: str(v) for k, v in json.loads(body or "{}").items()}
                    else:
                        form = {k: v[0] for k, v in parse_qs(body).items()}
                    answer = fake._access_token(form)
                    if "application/json" in self.headers.get("accept", ""):
                        self._send(
                            200, json.dumps(answer).encode(), {"Content-Type": "application/json"}
                        )
                    else:
                        encoded = urlencode(answer).encode()
                        self._send(
                            200, encoded, {"Content-Type": "application/x-www-form-urlencoded"}
                        )
                elif path in ("/user", "/api/v3/user") and method == "GET":
                    status, answer_json = fake._user(self.headers.get("authorization", ""))
                    self._send(
                        status,
                        json.dumps(answer_json).encode(),
                        {"Content-Type": "application/json; charset=utf-8"},
                    )
                else:
                    self._send(
                        404, b'{"message": "Not Found"}', {"Content-Type": "application/json"}
                    )

            def _send(self, status: int, raw: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

        return Handler
