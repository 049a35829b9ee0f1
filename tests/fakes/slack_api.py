"""A loopback Slack Web API: `auth.test`, `chat.postMessage`, `chat.update`,
`chat.postEphemeral`, `views.open`, speaking Slack's wire format.

Real HTTP on 127.0.0.1 (ephemeral port) in a thread, so slack-sdk's own
`WebClient` talks to it unchanged through `base_url`. Every call is recorded
(method, parameters, whether the bearer token matched). `rate_limit(method,
times, retry_after)` answers the next calls with HTTP 429 and `Retry-After`;
`fail(method, error)` answers `{"ok": false, "error": ...}`; `hold(method)`
keeps calls of `method` waiting until the event it returns is set.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

__all__ = ["BOT_TOKEN", "BOT_USER", "FakeSlack", "SlackCall", "fake_slack"]

BOT_TOKEN = "xoxb-test-bot-token-0000"
BOT_USER = "UBOT00001"
BOT_ID = "BBOT00001"
TEAM = "T00000001"


@dataclass(frozen=True)
class SlackCall:
    method: str
    params: dict[str, Any]
    authorized: bool
    status: int
    ok: bool


@dataclass
class FakeSlack:
    host: str = "127.0.0.1"
    calls: list[SlackCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _limits: dict[str, list[float]] = field(default_factory=dict)
    _failures: dict[str, list[str]] = field(default_factory=dict)
    _holds: dict[str, threading.Event] = field(default_factory=dict)
    _held: dict[str, int] = field(default_factory=dict)
    _ts: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _server: ThreadingHTTPServer | None = None
    _hold_timeout_s: float = 30.0

    # -- control -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://{self.host}:{self._server.server_address[1]}/api/"

    def rate_limit(self, method: str, *, times: int = 1, retry_after: float = 1) -> None:
        with self._lock:
            self._limits.setdefault(method, []).extend([retry_after] * times)

    def fail(self, method: str, error: str, *, times: int = 1) -> None:
        with self._lock:
            self._failures.setdefault(method, []).extend([error] * times)

    def hold(self, method: str, *, timeout_s: float = 30.0) -> threading.Event:
        """Calls of `method` wait until the returned event is set (at most `timeout_s`).

        The call is recorded once it is answered; `held(method)` counts the
        calls waiting now.
        """
        gate = threading.Event()
        with self._lock:
            self._holds[method] = gate
        self._hold_timeout_s = timeout_s
        return gate

    def held(self, method: str) -> int:
        with self._lock:
            return self._held.get(method, 0)

    def _wait_if_held(self, method: str) -> None:
        with self._lock:
            gate = self._holds.get(method)
            if gate is None or gate.is_set():
                return
            self._held[method] = self._held.get(method, 0) + 1
        try:
            gate.wait(self._hold_timeout_s)
        finally:
            with self._lock:
                self._held[method] -= 1

    def of(self, method: str, *, status: int = 200, ok: bool | None = True) -> list[SlackCall]:
        """Calls of `method` that got `status` and (unless `ok` is None) that `ok`."""
        with self._lock:
            return [
                c
                for c in self.calls
                if c.method == method and c.status == status and (ok is None or c.ok == ok)
            ]

    def wait_for(self, predicate: Callable[[FakeSlack], bool], timeout_s: float = 10.0) -> None:
        """Poll until `predicate(self)` holds (never a fixed sleep); AssertionError on timeout."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"fake Slack: condition not met; calls: {self.methods()}")
            time.sleep(0.005)

    def methods(self) -> list[str]:
        with self._lock:
            return [c.method for c in self.calls]

    def start(self) -> FakeSlack:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8") if length else ""
                if self.headers.get("Content-Type", "").startswith("application/json"):
                    params = json.loads(raw or "{}")
                else:
                    params = dict(parse_qsl(raw))
                method = self.path.removeprefix("/api/").split("?")[0]
                authorized = self.headers.get("Authorization") == f"Bearer {BOT_TOKEN}"
                fake._wait_if_held(method)
                status, headers, reply = fake._reply(method, params, authorized)
                with fake._lock:
                    fake.calls.append(
                        SlackCall(method, params, authorized, status, bool(reply.get("ok")))
                    )
                body = json.dumps(reply).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- Slack's answers -------------------------------------------------------------------

    def _reply(
        self, method: str, params: dict[str, Any], authorized: bool
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        with self._lock:
            limits = self._limits.get(method)
            if limits:
                retry_after = limits.pop(0)
                return (
                    429,
                    {"Retry-After": f"{retry_after:g}"},
                    {"ok": False, "error": "ratelimited"},
                )
            failures = self._failures.get(method)
            if failures:
                return 200, {}, {"ok": False, "error": failures.pop(0)}
            ts = f"1700000000.{next(self._ts):06d}"
        if not authorized:
            return 200, {}, {"ok": False, "error": "invalid_auth"}
        if method == "auth.test":
            return (
                200,
                {},
                {
                    "ok": True,
                    "url": "https://fake.slack.test/",
                    "team": "Fake",
                    "user": "agent-team",
                    "team_id": TEAM,
                    "user_id": BOT_USER,
                    "bot_id": BOT_ID,
                },
            )
        if method == "chat.postMessage":
            if not params.get("channel"):
                return 200, {}, {"ok": False, "error": "channel_not_found"}
            return (
                200,
                {},
                {
                    "ok": True,
                    "channel": params["channel"],
                    "ts": ts,
                    "message": {
                        "text": params.get("text"),
                        "ts": ts,
                        "bot_id": BOT_ID,
                        "user": BOT_USER,
                    },
                },
            )
        if method == "chat.update":
            return (
                200,
                {},
                {
                    "ok": True,
                    "channel": params.get("channel"),
                    "ts": params.get("ts"),
                    "text": params.get("text"),
                },
            )
        if method == "chat.postEphemeral":
            return 200, {}, {"ok": True, "message_ts": ts}
        if method == "views.open":
            if not params.get("trigger_id"):
                return 200, {}, {"ok": False, "error": "invalid_trigger_id"}
            return 200, {}, {"ok": True, "view": {"id": f"V{ts.replace('.', '')}"}}
        return 200, {}, {"ok": False, "error": "unknown_method"}


@contextmanager
def fake_slack() -> Iterator[FakeSlack]:
    fake = FakeSlack().start()
    try:
        yield fake
    finally:
        fake.stop()
