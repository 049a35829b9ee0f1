"""Is the process on the dashboard port our own daemon? Asked over its `/healthz`.

`doctor` binds the dashboard port to see that it is free; when that fails
because this ledger's own daemon listens there, that is a running daemon, not
a fault. The ledger's lock file names the daemon that runs on it (pid and
address), and `/healthz` says whether it is healthy and whether it takes
dashboard writes (it has a token), which this process cannot know from its
own settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from agent_team import db

__all__ = ["RunningDaemon", "probe_daemon"]


@dataclass(frozen=True)
class RunningDaemon:
    """An agent-team daemon answering `/healthz` on the dashboard port."""

    url: str
    healthy: bool
    writes: bool | None  # None: the daemon did not say
    on_this_ledger: bool
    holder: db.DaemonHolder | None  # this ledger's daemon, as its lock file says
    reasons: tuple[str, ...] = ()  # why `/readyz` says it is not ready
    last_write_failure: str | None = None  # "<time>: <error>", even if it recovered since


def _probe_host(host: str) -> str:
    """Where to reach a server listening on `host` (every address means loopback will do)."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _port_of(url: str | None) -> int | None:
    try:
        return urlsplit(url).port if url else None
    except ValueError:
        return None


def probe_daemon(
    host: str, port: int, ledger: Path, *, timeout_s: float = 3.0
) -> RunningDaemon | None:
    """The agent-team daemon on `host:port`, or None if what listens there is not one of ours."""
    url = f"http://{_probe_host(host)}:{port}/"
    try:
        response = httpx.get(url + "healthz", timeout=timeout_s)
        body = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(body, dict) or not {"status", "db", "loops"} <= body.keys():
        return None
    facts = body.get("facts")
    writes = facts.get("dashboard_writes") if isinstance(facts, dict) else None
    holder = db.daemon_holder(ledger)
    reasons, failure = _readiness(url, timeout_s)
    return RunningDaemon(
        url=url,
        healthy=response.status_code == 200 and body.get("status") == "ok" and not reasons,
        writes=writes if isinstance(writes, bool) else None,
        on_this_ledger=holder is not None and _port_of(holder.url) == port,
        holder=holder,
        reasons=reasons,
        last_write_failure=failure,
    )


def _readiness(url: str, timeout_s: float) -> tuple[tuple[str, ...], str | None]:
    """What `/readyz` says (a daemon older than `/readyz` says nothing: ready)."""
    try:
        body = httpx.get(url + "readyz", timeout=timeout_s).json()
    except (httpx.HTTPError, ValueError):
        return (), None
    if not isinstance(body, dict):
        return (), None
    raw = body.get("reasons")
    reasons = tuple(str(r) for r in raw) if isinstance(raw, list) else ()
    last = body.get("last_write_failure")
    failure = f"{last.get('at')}: {last.get('error')}" if isinstance(last, dict) else None
    return reasons, failure
