"""The HTTP access log: one line per request, written by a thread of its own.

Why a thread: the log handler writes to stderr (a pipe to journald, a file),
which can block; on the event loop that would stall every request. A request
only puts a few short strings on a bounded queue; the writer thread redacts
them and hands them to the `agent_team.access` logger, whose records go
through the daemon's handler and formatter like any other (JSON when
`AGENT_TEAM_LOG_FORMAT=json`, with the fields under `http`). When the writer
falls behind by `QUEUE_LINES`, lines are dropped and counted, never waited
for.

What a line holds, each part bounded: method, the path with every query
value replaced by `*` (a `?token=...` never reaches the log; the parameter
names stay), status, duration in ms, who (the key's or session's name as
`auth.note_who` found it, `-` for nobody) and the client address. The
redaction rule and the dashboard's own tokens are applied on top.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote_plus

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_team.common.redact import redact
from agent_team.dashboard.auth import who_of

__all__ = ["ACCESS_LOGGER", "AccessLog", "flush", "loggable_path"]

ACCESS_LOGGER = "agent_team.access"
QUEUE_LINES = 10_000
MAX_PATH_CHARS = 200
MAX_PARAMS = 20
MAX_NAME_CHARS = 40
MAX_FIELD_CHARS = 100

log = logging.getLogger(ACCESS_LOGGER)

Secrets = Callable[[], Iterable[str]]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def loggable_path(path: str, query: bytes) -> str:
    """`path?name=*&...`: the parameter names of the query without any of its values."""
    shown = _cut(path, MAX_PATH_CHARS)
    if not query:
        return shown
    parts = [part for part in query.split(b"&") if part]
    names = [
        _cut(unquote_plus(part.split(b"=", 1)[0].decode("latin-1")), MAX_NAME_CHARS) + "=*"
        for part in parts[:MAX_PARAMS]
    ]
    if len(parts) > MAX_PARAMS:
        names.append(f"…({len(parts) - MAX_PARAMS} more)")
    return f"{shown}?{'&'.join(names)}"


class _Writer:
    """The one thread that turns queued requests into log records, started on first use."""

    def __init__(self) -> None:
        self.lines: queue.Queue[tuple[dict[str, Any], Secrets]] = queue.Queue(QUEUE_LINES)
        self.dropped = 0
        self._start = threading.Lock()
        self._thread: threading.Thread | None = None

    def put(self, fields: dict[str, Any], secrets: Secrets) -> None:
        if self._thread is None:
            with self._start:
                if self._thread is None:
                    thread = threading.Thread(
                        target=self._run, name="agent-team-access-log", daemon=True
                    )
                    thread.start()
                    self._thread = thread
        try:
            self.lines.put_nowait((fields, secrets))
        except queue.Full:
            self.dropped += 1  # only ever counted, never waited for

    def _run(self) -> None:
        while True:
            fields, secrets = self.lines.get()
            try:
                self._write(fields, secrets)
            except Exception:  # a broken line must not end the log
                logging.getLogger(__name__).exception("access log: a line could not be written")
            finally:
                self.lines.task_done()

    def _write(self, fields: dict[str, Any], secrets: Secrets) -> None:
        if self.dropped:
            dropped, self.dropped = self.dropped, 0
            log.warning("access log: %d line(s) dropped; the log could not keep up", dropped)
        known = tuple(secrets())
        clean = {
            name: redact(value, known) if isinstance(value, str) else value
            for name, value in fields.items()
        }
        log.info(
            "%s %s %d %.1fms %s %s",
            clean["method"],
            clean["path"],
            clean["status"],
            clean["duration_ms"],
            clean["who"],
            clean["client"],
            extra={"http": clean},
        )

    def flush(self, timeout_s: float) -> bool:
        """Wait until every queued line is written; False if `timeout_s` ran out first."""
        done = self.lines.all_tasks_done
        with done:
            return done.wait_for(lambda: self.lines.unfinished_tasks == 0, timeout_s)


_WRITER = _Writer()


def flush(timeout_s: float = 5.0) -> bool:
    """Write out what is queued (at shutdown, and in tests before reading the log)."""
    return _WRITER.flush(timeout_s)


class AccessLog:
    """Pure ASGI, outermost: sees every response, the refusals of the other layers too."""

    def __init__(self, app: ASGIApp, *, secrets: Secrets) -> None:
        self.app = app
        self.secrets = secrets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        scope.setdefault("state", {})  # shared with the layers below, which note who
        status = 500  # what the server answers when a layer below raises

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            client = scope.get("client")
            fields: dict[str, Any] = {
                "method": _cut(str(scope.get("method", "")), 16),
                "path": loggable_path(scope.get("path", ""), scope.get("query_string", b"")),
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                "who": _cut(who_of(scope) or "-", MAX_FIELD_CHARS),
                "client": _cut(str(client[0]) if client else "-", MAX_FIELD_CHARS),
            }
            _WRITER.put(fields, self.secrets)
