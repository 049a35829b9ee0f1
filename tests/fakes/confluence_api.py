"""A loopback Confluence Cloud (REST v2) for tests: pages with versions, auth, 409, 429, OAuth.

A real HTTP server on 127.0.0.1 (ephemeral port) in a thread, speaking the
v2 wire format the client uses: `GET/PUT /wiki/api/v2/pages/{id}`,
`GET/POST /wiki/api/v2/pages`, `GET /wiki/api/v2/spaces/{id}`, and an OAuth
token endpoint at `/oauth/token`. Bodies are ADF as a JSON string in
`body.atlas_doc_format.value`. Every request is recorded for assertions.

Knobs: `fail_next[(method, path_prefix)] = [(status, headers), ...]` answers the
next matching requests with those statuses (e.g. one 429 with Retry-After);
`bump_before_put[page_id] = n` saves n versions by "someone else" just before
the next PUT of that page arrives (so it is stale: 409);
`lose_response[(method, path_prefix)] = ["drop" | "stall" | "503", ...]` applies
the next matching write, then loses its response: "drop" closes the connection
without an answer, "stall" holds the answer until the client times out, "503"
answers 503 as a gateway would (a lost response after the write landed).
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["FakeConfluence", "FakePage", "Recorded", "fake_confluence"]

EMAIL = "bot@example.com"
API_TOKEN = "confluence-api-token-123"
CLIENT_ID = "client-abc"
CLIENT_SECRET = "client-secret-xyz"


@dataclass
class FakePage:
    id: str
    space_id: str
    title: str
    body: str  # ADF JSON text, stored exactly as sent
    version: int = 1
    message: str = ""
    parent_id: str | None = None

    def to_json(self, with_body: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "status": "current",
            "title": self.title,
            "spaceId": self.space_id,
            "parentId": self.parent_id,
            "version": {"number": self.version, "message": self.message, "minorEdit": False},
            "_links": {"webui": f"/spaces/S{self.space_id}/pages/{self.id}"},
        }
        if with_body:
            data["body"] = {
                "atlas_doc_format": {"representation": "atlas_doc_format", "value": self.body}
            }
        return data


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    auth: str  # "basic", "bearer", "none" or "bad"
    body: Any


@dataclass
class FakeConfluence:
    spaces: set[str] = field(default_factory=lambda: {"1001"})
    pages: dict[str, FakePage] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    fail_next: dict[tuple[str, str], list[tuple[int, dict[str, str]]]] = field(default_factory=dict)
    bump_before_put: dict[str, int] = field(default_factory=dict)
    lose_response: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    released: threading.Event = field(default_factory=threading.Event)
    tokens: dict[str, float] = field(default_factory=dict)  # issued bearer tokens
    token_lifetime_s: int = 3600
    lock: threading.Lock = field(default_factory=threading.Lock)
    base_url: str = ""
    token_url: str = ""
    _next_id: int = 5000

    def add_page(self, title: str, doc: Any, *, space_id: str = "1001", version: int = 1) -> str:
        with self.lock:
            self._next_id += 1
            page_id = str(self._next_id)
            body = doc if isinstance(doc, str) else json.dumps(doc, separators=(",", ":"))
            self.pages[page_id] = FakePage(page_id, space_id, title, body, version)
            return page_id

    def writes(self) -> list[Recorded]:
        return [r for r in self.requests if r.method in ("POST", "PUT") and "/api/v2/" in r.path]

    # -- request handling (called from the server threads) --------------------------------

    def _auth(self, header: str | None) -> str:
        if not header:
            return "none"
        kind, _, value = header.partition(" ")
        if kind == "Basic":
            try:
                decoded = base64.b64decode(value).decode()
            except ValueError:
                return "bad"
            return "basic" if decoded == f"{EMAIL}:{API_TOKEN}" else "bad"
        if kind == "Bearer":
            return "bearer" if value in self.tokens else "bad"
        return "bad"

    def losing(self, method: str, raw_path: str) -> str | None:
        """How the response of this request is lost ("drop"/"stall"), or None; pops the knob."""
        path = urlsplit(raw_path).path
        with self.lock:
            for (m, prefix), queue in self.lose_response.items():
                if m == method and path.startswith(prefix) and queue:
                    return queue.pop(0)
        return None

    def handle(
        self, method: str, raw_path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], Any]:
        split = urlsplit(raw_path)
        path, query = split.path, parse_qs(split.query)
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = "<invalid json>"
        with self.lock:
            auth = self._auth(headers.get("authorization"))
            self.requests.append(Recorded(method, path, query, auth, payload))
            if path == "/oauth/token":
                return self._token(payload)
            for (m, prefix), queue in self.fail_next.items():
                if m == method and path.startswith(prefix) and queue:
                    status, extra = queue.pop(0)
                    return status, extra, {"errors": [{"status": status, "title": "injected"}]}
            if auth in ("none", "bad"):
                return 401, {}, {"errors": [{"status": 401, "title": "Unauthorized"}]}
            return self._route(method, path, query, payload)

    def _token(self, payload: Any) -> tuple[int, dict[str, str], Any]:
        if (
            not isinstance(payload, dict)
            or payload.get("grant_type") != "client_credentials"
            or payload.get("client_id") != CLIENT_ID
            or payload.get("client_secret") != CLIENT_SECRET
        ):
            return 401, {}, {"error": "access_denied"}
        token = "tok-" + secrets.token_hex(8)
        self.tokens[token] = self.token_lifetime_s
        return (
            200,
            {},
            {"access_token": token, "expires_in": self.token_lifetime_s, "token_type": "Bearer"},
        )

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], payload: Any
    ) -> tuple[int, dict[str, str], Any]:
        not_found = (404, {}, {"errors": [{"status": 404, "title": "Not Found"}]})
        if match := re.fullmatch(r"/wiki/api/v2/spaces/(\d+)", path):
            if method == "GET" and match.group(1) in self.spaces:
                return 200, {}, {"id": match.group(1), "key": "S" + match.group(1)}
            return not_found
        if path == "/wiki/api/v2/pages" and method == "GET":
            space = (query.get("space-id") or [""])[0]
            title = (query.get("title") or [""])[0]
            found = [
                p.to_json() for p in self.pages.values() if p.space_id == space and p.title == title
            ]
            return 200, {}, {"results": found, "_links": {}}
        if path == "/wiki/api/v2/pages" and method == "POST":
            return self._create(payload)
        if match := re.fullmatch(r"/wiki/api/v2/pages/(\d+)", path):
            page = self.pages.get(match.group(1))
            if page is None:
                return not_found
            if method == "GET":
                if query.get("body-format") != ["atlas_doc_format"]:
                    return 400, {}, {"errors": [{"status": 400, "title": "body-format"}]}
                return 200, {}, page.to_json()
            if method == "PUT":
                return self._update(page, payload)
        return not_found

    def _body_value(self, payload: dict[str, Any]) -> str | None:
        body = payload.get("body")
        if not isinstance(body, dict) or body.get("representation") != "atlas_doc_format":
            return None
        value = body.get("value")
        return value if isinstance(value, str) else None

    def _create(self, payload: Any) -> tuple[int, dict[str, str], Any]:
        bad = (400, {}, {"errors": [{"status": 400, "title": "Bad request"}]})
        if not isinstance(payload, dict) or payload.get("status") != "current":
            return bad
        value = self._body_value(payload)
        if value is None or not isinstance(payload.get("title"), str):
            return bad
        if payload.get("spaceId") not in self.spaces:
            return 404, {}, {"errors": [{"status": 404, "title": "space not found"}]}
        if any(
            p.title == payload["title"] and p.space_id == payload["spaceId"]
            for p in self.pages.values()
        ):
            return (
                400,
                {},
                {"errors": [{"status": 400, "title": "A page with this title already exists"}]},
            )
        self._next_id += 1
        page = FakePage(
            str(self._next_id),
            str(payload["spaceId"]),
            payload["title"],
            value,
            1,
            "",
            payload.get("parentId"),
        )
        self.pages[page.id] = page
        return 200, {}, page.to_json(with_body=False)

    def _update(self, page: FakePage, payload: Any) -> tuple[int, dict[str, str], Any]:
        bad = (400, {}, {"errors": [{"status": 400, "title": "Bad request"}]})
        if not isinstance(payload, dict) or payload.get("id") != page.id:
            return bad
        value = self._body_value(payload)
        version = payload.get("version")
        if value is None or not isinstance(version, dict):
            return bad
        bump = self.bump_before_put.pop(page.id, 0)
        if bump:  # someone else saves first
            page.version += bump
            page.message = "edited by someone else"
        if version.get("number") != page.version + 1:
            return (
                409,
                {},
                {
                    "errors": [
                        {"status": 409, "code": "CONFLICT", "title": "Version must be incremented"}
                    ]
                },
            )
        page.version += 1
        page.body = value
        page.title = str(payload.get("title") or page.title)
        page.message = str(version.get("message") or "")
        return 200, {}, page.to_json(with_body=False)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake = self.server.fake
        lost = fake.losing(self.command, self.path)
        status, extra, data = fake.handle(self.command, self.path, headers, body)
        if lost == "503":  # applied, but a gateway answers 503
            status, extra, data = 503, {}, {"errors": [{"status": 503, "title": "gateway"}]}
        elif lost is not None:  # the write is applied; its answer never arrives
            if lost == "stall":
                fake.released.wait(timeout=10)
            self.close_connection = True
            return
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_POST = do_PUT = _serve

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeConfluence


@contextmanager
def fake_confluence() -> Iterator[FakeConfluence]:
    """Run a FakeConfluence on an ephemeral loopback port for the `with` block."""
    server = _Server(("127.0.0.1", 0), _Handler)
    fake = FakeConfluence()
    server.fake = fake
    host, port = server.server_address[:2]
    fake.base_url = f"http://{host}:{port}/wiki"
    fake.token_url = f"http://{host}:{port}/oauth/token"
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name="fake-confluence",
        daemon=True,
    )
    thread.start()
    try:
        yield fake
    finally:
        fake.released.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
