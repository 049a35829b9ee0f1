"""A loopback GitHub REST API: enough of the documented wire format for the intake.

A real HTTP server on 127.0.0.1 (ephemeral port) in a thread. It speaks what
the intake relies on: `Link: <...>; rel="next"` pagination (`per_page`
honoured, max 100; the next URL carries an opaque `cursor` the client can only
get by following the link), `ETag` / `If-None-Match` -> 304, the
`x-ratelimit-*` headers, injected failures (a 429 with `retry-after`, a
broken repository), issue comments (create, edit, list) and pull requests
(create as draft, list by `head`). A pull request can only be opened for a
branch that exists in the repository's remote, a real bare git repository
the test pushes to.

The same server is also the git host: `<url>/<owner>/<repo>.git` speaks git's
smart HTTP protocol through `git http-backend` (`tests.git_server.http_backend`)
over the repository's bare remote, and only with the token as Basic auth
(`x-access-token:<token>`), as GitHub does. `git_requests` records who pushed with which header.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.fakes.http_body import read_body
from tests.git_server import http_backend

__all__ = ["FakeGitHub", "FakeRepo", "Recorded"]


@dataclass
class FakeRepo:
    owner: str
    name: str
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    pulls: list[dict[str, Any]] = field(default_factory=list)
    default_branch: str = "main"
    remote: Path | None = None  # a bare git repository the branches are pushed to
    broken: int | None = None  # every request answers this status
    next_number: int = 1

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


class FakeGitHub:
    """`with FakeGitHub(token=...) as gh:` then point `AGENT_TEAM_GITHUB_API_URL` at `gh.url`."""

    def __init__(self, token: str | None = None, *, rate_limit: int = 5000) -> None:
        self.token = token
        self.repos: dict[str, FakeRepo] = {}
        self.comments: dict[int, dict[str, Any]] = {}
        self.requests: list[Recorded] = []
        self.rate_remaining = rate_limit
        self.rate_reset = int(time.time()) + 3600
        self.forced: list[tuple[str, int, dict[str, str]]] = []  # (path prefix, status, headers)
        self.git_requests: list[Recorded] = []  # smart-HTTP requests to `<owner>/<repo>.git`
        self.link_base: str | None = None  # put next-page links on another server (a test)
        self.comments_page_cap = 100  # GitHub's per_page maximum; lower it to force pages
        self.lock = threading.RLock()
        self._clock = 0
        self._next_id = 9000
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # -- life cycle ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- building the world ---------------------------------------------------------------

    def add_repo(self, full_name: str, **kwargs: Any) -> FakeRepo:
        owner, name = full_name.split("/")
        repo = FakeRepo(owner, name, **kwargs)
        with self.lock:
            self.repos[full_name.lower()] = repo
        return repo

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def add_issue(
        self,
        full_name: str,
        *,
        title: str | None = None,
        body: str | None = "Please do the thing.",
        labels: tuple[str, ...] = (),
        pull_request: bool = False,
        state: str = "open",
        raw: dict[str, Any] | None = None,
    ) -> int:
        """Add an issue (or a pull request, which the issues API lists too); returns its number."""
        with self.lock:
            repo = self.repos[full_name.lower()]
            number = repo.next_number
            repo.next_number += 1
            item: dict[str, Any] = {
                "id": 100000 + number,
                "number": number,
                "title": title or f"Issue {number}",
                "body": body,
                "state": state,
                "html_url": f"https://github.example/{repo.full_name}/issues/{number}",
                "labels": [{"id": i, "name": name} for i, name in enumerate(labels)],
                "user": {"login": "someone"},
                "_updated": self._tick(),
            }
            if pull_request:
                item["pull_request"] = {"url": f"{self.url}/repos/{repo.full_name}/pulls/{number}"}
                item["html_url"] = f"https://github.example/{repo.full_name}/pull/{number}"
            if raw is not None:
                item = {**raw, "number": number, "_updated": self._tick()}
            repo.issues[number] = item
            return number

    def touch(self, full_name: str, number: int, **changes: Any) -> None:
        """Change an issue (labels as a tuple of names); it moves to the top of `sort=updated`."""
        with self.lock:
            item = self.repos[full_name.lower()].issues[number]
            if "labels" in changes:
                changes["labels"] = [{"id": 1, "name": n} for n in changes["labels"]]
            item.update(changes)
            item["_updated"] = self._tick()

    def force(self, path_prefix: str, status: int, headers: dict[str, str] | None = None) -> None:
        """The next request whose path starts with `path_prefix` gets `status` (once)."""
        with self.lock:
            self.forced.append((path_prefix, status, headers or {}))

    def seen(self, method: str | None = None, path: str | None = None) -> list[Recorded]:
        with self.lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and (path is None or r.path == path)
            ]

    def comments_on(self, full_name: str, number: int) -> list[dict[str, Any]]:
        with self.lock:
            return [
                c
                for c in self.comments.values()
                if c["_repo"] == full_name.lower() and c["_issue"] == number
            ]

    # -- the server -----------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self, method: str) -> None:
                raw = read_body(self)
                parts = urlsplit(self.path)
                if _GIT_PATH.match(parts.path):
                    self._send(*fake._git(method, parts.path, parts.query, self.headers, raw))
                    return
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                headers = {k.lower(): v for k, v in self.headers.items()}
                with fake.lock:
                    fake.requests.append(
                        Recorded(method, parts.path, parse_qs(parts.query), headers, body)
                    )
                    status, payload, extra = fake._route(
                        method, parts.path, parse_qs(parts.query), headers, body
                    )
                data = b"" if payload is None else json.dumps(payload).encode()
                extra = {"Content-Type": "application/json; charset=utf-8", **extra}
                self._send(status, extra, data)

            def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                if data:
                    self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PATCH(self) -> None:
                self._serve("PATCH")

        return Handler

    def _git(
        self, method: str, path: str, query: str, headers: Any, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """git smart HTTP for `/<owner>/<repo>.git/...`, through `git http-backend` (CGI)."""
        match = _GIT_PATH.match(path)
        assert match is not None
        lowered = {k.lower(): v for k, v in headers.items()}
        with self.lock:
            self.git_requests.append(Recorded(method, path, parse_qs(query), lowered, None))
            repo = self.repos.get(f"{match.group(1)}/{match.group(2)}".lower())
        wanted = "Basic " + base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        if self.token is not None and lowered.get("authorization") != wanted:
            return 401, {"WWW-Authenticate": 'Basic realm="GitHub"'}, b"Bad credentials"
        if repo is None or repo.remote is None or not repo.remote.is_dir():
            return 404, {}, b"Repository not found."
        return http_backend(
            repo.remote.parent,
            f"/{repo.remote.name}{match.group(3)}",
            method=method,
            query=query,
            headers=lowered,
            body=body,
            remote_user="x-access-token",  # lets http-backend accept a push
        )

    def _rate_headers(self) -> dict[str, str]:
        return {
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": str(max(self.rate_remaining, 0)),
            "x-ratelimit-reset": str(self.rate_reset),
        }

    def _route(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        headers: dict[str, str],
        body: Any,
    ) -> tuple[int, Any, dict[str, str]]:
        for index, (prefix, status, extra) in enumerate(self.forced):
            if path.startswith(prefix):
                del self.forced[index]
                return status, {"message": f"forced {status}"}, {**self._rate_headers(), **extra}
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            return 401, {"message": "Bad credentials"}, {}
        self.rate_remaining -= 1
        rate = self._rate_headers()
        segments = [s for s in path.split("/") if s]
        if len(segments) < 3 or segments[0] != "repos":
            return 404, {"message": "Not Found"}, rate
        repo = self.repos.get(f"{segments[1]}/{segments[2]}".lower())
        if repo is None:
            return 404, {"message": "Not Found"}, rate
        if repo.broken is not None:
            return repo.broken, {"message": "Server Error"}, rate
        rest = segments[3:]
        one = {k: v[0] for k, v in query.items()}
        if method == "GET" and not rest:
            return 200, {"full_name": repo.full_name, "default_branch": repo.default_branch}, rate
        if method == "GET" and rest == ["issues"]:
            return self._list_issues(repo, path, one, headers, rate)
        if method == "GET" and len(rest) == 2 and rest[0] == "issues" and rest[1].isdigit():
            item = repo.issues.get(int(rest[1]))
            if item is None:
                return 404, {"message": "Not Found"}, rate
            return 200, _public(item), rate
        if len(rest) == 3 and rest[0] == "issues" and rest[2] == "comments":
            number = int(rest[1])
            if number not in repo.issues:
                return 404, {"message": "Not Found"}, rate
            if method == "POST":
                if not isinstance(body, dict) or not isinstance(body.get("body"), str):
                    return 422, {"message": "body is required"}, rate
                self._next_id += 1
                comment = {
                    "id": self._next_id,
                    "body": body["body"],
                    "html_url": f"https://github.example/{repo.full_name}/issues/{number}"
                    f"#issuecomment-{self._next_id}",
                    "_repo": repo.full_name.lower(),
                    "_issue": number,
                }
                self.comments[self._next_id] = comment
                return 201, _public(comment), rate
            return self._list_comments(repo, number, path, one, rate)
        if method == "PATCH" and len(rest) == 3 and rest[:2] == ["issues", "comments"]:
            found = self.comments.get(int(rest[2]))
            if found is None or found["_repo"] != repo.full_name.lower():
                return 404, {"message": "Not Found"}, rate
            if not isinstance(body, dict) or not isinstance(body.get("body"), str):
                return 422, {"message": "body is required"}, rate
            found["body"] = body["body"]
            return 200, _public(found), rate
        if rest == ["pulls"] and method == "GET":
            head = one.get("head", "")
            owner, _, branch = head.partition(":")
            pulls = [
                p
                for p in repo.pulls
                if not head or (owner.lower() == repo.owner.lower() and p["head"]["ref"] == branch)
            ]
            return 200, pulls, rate
        if rest == ["pulls"] and method == "POST":
            return self._create_pull(repo, body, rate)
        return 404, {"message": "Not Found"}, rate

    def _list_issues(
        self,
        repo: FakeRepo,
        path: str,
        query: dict[str, str],
        headers: dict[str, str],
        rate: dict[str, str],
    ) -> tuple[int, Any, dict[str, str]]:
        per_page = min(int(query.get("per_page", "30")), 100)
        page = 1
        if "cursor" in query:  # only a followed Link carries it
            page = int(query["cursor"].removeprefix("c"))
        elif "page" in query:
            return 400, {"message": "follow the Link header"}, rate
        wanted = {name for name in query.get("labels", "").split(",") if name}
        state = query.get("state", "open")
        items = [
            item
            for item in repo.issues.values()
            if (state == "all" or item.get("state", "open") == state)
            and wanted <= {label["name"] for label in item.get("labels", [])}
        ]
        if query.get("sort") == "updated":
            items.sort(key=lambda item: item["_updated"], reverse=query.get("direction") != "asc")
        else:
            items.sort(key=lambda item: item["number"], reverse=True)
        chunk = [_public(item) for item in items[(page - 1) * per_page : page * per_page]]
        extra = dict(rate)
        etag = 'W/"' + hashlib.sha256(json.dumps([path, query, chunk]).encode()).hexdigest() + '"'
        extra["ETag"] = etag
        if headers.get("if-none-match") == etag:
            self.rate_remaining += 1  # GitHub does not count a 304 against the limit
            return 304, None, {**self._rate_headers(), "ETag": etag}
        if page * per_page < len(items):
            following = {k: v for k, v in query.items() if k != "cursor"}
            following["cursor"] = f"c{page + 1}"
            base = self.link_base or self.url
            extra["Link"] = f'<{base}{path}?{urlencode(following)}>; rel="next"'
        return 200, chunk, extra

    def _list_comments(
        self, repo: FakeRepo, number: int, path: str, query: dict[str, str], rate: dict[str, str]
    ) -> tuple[int, Any, dict[str, str]]:
        per_page = min(int(query.get("per_page", "30")), self.comments_page_cap)
        page = int(query.get("cursor", "c1").removeprefix("c"))
        found = [_public(c) for c in self.comments_on(repo.full_name, number)]
        extra = dict(rate)
        if page * per_page < len(found):
            following = {k: v for k, v in query.items() if k != "cursor"}
            following["cursor"] = f"c{page + 1}"
            base = self.link_base or self.url
            extra["Link"] = f'<{base}{path}?{urlencode(following)}>; rel="next"'
        return 200, found[(page - 1) * per_page : page * per_page], extra

    def _create_pull(
        self, repo: FakeRepo, body: Any, rate: dict[str, str]
    ) -> tuple[int, Any, dict[str, str]]:
        if not isinstance(body, dict) or not all(
            isinstance(body.get(key), str) for key in ("title", "head", "base")
        ):
            return 422, {"message": "title, head and base are required"}, rate
        head = body["head"]
        if any(p["head"]["ref"] == head and p["state"] == "open" for p in repo.pulls):
            return 422, {"message": f"A pull request already exists for {repo.owner}:{head}."}, rate
        if repo.remote is None or not _has_branch(repo.remote, head):
            return 422, {"message": f"head {head} does not exist in the repository"}, rate
        number = repo.next_number
        repo.next_number += 1
        pull = {
            "number": number,
            "html_url": f"https://github.example/{repo.full_name}/pull/{number}",
            "state": "open",
            "draft": bool(body.get("draft")),
            "title": body["title"],
            "body": body.get("body"),
            "head": {"ref": head, "label": f"{repo.owner}:{head}"},
            "base": {"ref": body["base"]},
        }
        repo.pulls.append(pull)
        return 201, pull, rate


_GIT_PATH = re.compile(r"^/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)\.git(/.*)$")


def _public(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if not k.startswith("_")}


def _has_branch(remote: Path, branch: str) -> bool:
    done = subprocess.run(
        [
            "git",
            "--git-dir",
            str(remote),
            "rev-parse",
            "--verify",
            "--quiet",
            f"refs/heads/{branch}",
        ],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0
