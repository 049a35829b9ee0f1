"""A loopback git host: git's smart HTTP protocol over bare repositories, as a test fixture.

A real HTTP server on 127.0.0.1 (ephemeral port) in a thread; every request
runs `git http-backend` as CGI over `root/<owner>/<name>.git`, so the client
is the real git talking the real protocol (v2 included). What tests need of a
host besides:

- `token`: every request must carry `Authorization: Basic` with
  `x-access-token:<token>` (what GitHub takes), else 401 with a
  `WWW-Authenticate` challenge;
- `gone`: while set, every request answers 503 (the remote went away);
- `requests`: each request's method, path, service and whether it carried
  the right credential; `max_fetching`: the most upload-pack (fetch)
  requests served at once; `on_fetch`: called inside each of them (to look
  at what the fetching side holds meanwhile).

`http_backend()` is the CGI call alone; `tests/fakes/github_api.py` serves its
repositories through it too. Pushes work when the request is authorised
(`REMOTE_USER` is set, which `http-backend` requires for `receive-pack`).
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.http_body import read_body

__all__ = ["GitRequest", "GitServer", "git", "http_backend", "make_remote", "push_commit"]

_ENV = {
    "PATH": os.environ.get("PATH", os.defpath),
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}


def git(cwd: Path, *args: str) -> str:
    """Run git as a person would on the remote's side (test identity, no user config)."""
    done = subprocess.run(
        ["git", "-c", "user.name=Tester", "-c", "user.email=tester@example.com", *args],
        cwd=cwd,
        env={**_ENV, "HOME": str(cwd)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout.strip()


def make_remote(root: Path, name: str, *, branch: str = "main") -> Path:
    """A bare repository `root/<name>.git` whose `branch` (its HEAD) has one commit."""
    bare = root / f"{name}.git"
    bare.parent.mkdir(parents=True, exist_ok=True)
    git(bare.parent, "init", "-q", "--bare", "-b", branch, str(bare))
    push_commit(bare, "first", {"README.md": f"# {name}\n"}, branch=branch)
    return bare


def push_commit(bare: Path, message: str, files: Mapping[str, str], *, branch: str = "main") -> str:
    """Commit `files` on top of `branch` of the bare repository, as a push would; its sha."""
    scratch = bare.with_name(bare.name + ".work")
    if not scratch.exists():
        git(bare.parent, "clone", "-q", str(bare), str(scratch))
    git(scratch, "fetch", "-q", "origin")
    has_branch = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"origin/{branch}"],
        cwd=scratch,
        env=_ENV,
        capture_output=True,
        check=False,
    )
    if has_branch.returncode == 0:
        git(scratch, "checkout", "-q", "-B", branch, f"origin/{branch}")
    else:
        git(scratch, "checkout", "-q", "--orphan", branch)
    for relative, text in files.items():
        target = scratch / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    git(scratch, "add", "-A")
    git(scratch, "commit", "-q", "-m", message)
    git(scratch, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
    return git(scratch, "rev-parse", "HEAD")


def http_backend(
    project_root: Path,
    path_info: str,
    *,
    method: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    remote_user: str | None,
) -> tuple[int, dict[str, str], bytes]:
    """One smart-HTTP request through `git http-backend` (CGI): status, headers, body.

    Args:
        project_root: the folder the repositories are under (`GIT_PROJECT_ROOT`).
        path_info: `/<repo path>/info/refs` and so on, below `project_root`.
        headers: the request's headers, lower-case names.
        remote_user: who is signed in (http-backend takes pushes only with one).
    """
    env = {
        **_ENV,
        "GIT_PROJECT_ROOT": str(project_root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "PATH_INFO": path_info,
        "REQUEST_METHOD": method,
        "QUERY_STRING": query,
        "CONTENT_TYPE": headers.get("content-type", ""),
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_CONTENT_ENCODING": headers.get("content-encoding", ""),
        "GIT_PROTOCOL": headers.get("git-protocol", ""),
        "REMOTE_ADDR": "127.0.0.1",
    }
    if remote_user is not None:
        env["REMOTE_USER"] = remote_user
    done = subprocess.run(
        ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
    )
    head, sep, data = done.stdout.partition(b"\r\n\r\n")
    if not sep:
        head, sep, data = done.stdout.partition(b"\n\n")
    status, out = 200, {}
    for line in head.decode("latin-1").splitlines():
        key, _, value = line.partition(":")
        if key.lower() == "status":
            status = int(value.split()[0])
        elif key:
            out[key.strip()] = value.strip()
    return status, out, data


@dataclass(frozen=True)
class GitRequest:
    method: str
    path: str
    service: str  # git-upload-pack (a fetch), git-receive-pack (a push)
    authorised: bool  # carried the token's credential (always true without a token)
    status: int


class GitServer:
    """`with GitServer(root) as server:` then fetch `server.url_of("owner/name")`."""

    def __init__(self, root: Path, *, token: str | None = None) -> None:
        self.root = root
        self.token = token
        self.gone = False
        self.requests: list[GitRequest] = []
        self.on_fetch: Callable[[str], None] | None = None
        self.max_fetching = 0
        self._fetching = 0
        self._lock = threading.Lock()
        root.mkdir(parents=True, exist_ok=True)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def url_of(self, name: str) -> str:
        return f"{self.url}/{name}.git"

    def add(self, name: str, *, branch: str = "main") -> Path:
        """A new remote `name` (`owner/name`) with one commit on `branch`."""
        return make_remote(self.root, name, branch=branch)

    def fetches(self) -> list[GitRequest]:
        with self._lock:
            return [r for r in self.requests if r.service == "git-upload-pack"]

    def __enter__(self) -> GitServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _credential_ok(self, headers: Mapping[str, str]) -> bool:
        if self.token is None:
            return True
        basic = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        return headers.get("authorization") == f"Basic {basic}"

    def _serve(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(target)
        service = parse_qs(parts.query).get("service", [parts.path.rsplit("/", 1)[-1]])[0]
        authorised = self._credential_ok(headers)
        fetching = service == "git-upload-pack"
        if self.gone:
            status, out, data = 503, {}, b"the git host is down\n"
        elif not authorised:
            status, out, data = 401, {"WWW-Authenticate": 'Basic realm="git"'}, b"Bad credentials"
        else:
            if fetching:
                with self._lock:
                    self._fetching += 1
                    self.max_fetching = max(self.max_fetching, self._fetching)
            try:
                if fetching and self.on_fetch is not None:
                    self.on_fetch(parts.path)
                status, out, data = http_backend(
                    self.root,
                    parts.path,
                    method=method,
                    query=parts.query,
                    headers=headers,
                    body=body,
                    remote_user="x-access-token",
                )
            finally:
                if fetching:
                    with self._lock:
                        self._fetching -= 1
        with self._lock:
            self.requests.append(GitRequest(method, parts.path, service, authorised, status))
        return status, out, data

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, method: str) -> None:
                body = read_body(self)
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, out, data = server._serve(method, self.path, headers, body)
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                for key, value in out.items():
                    if key.lower() != "content-length":
                        self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

        return Handler
