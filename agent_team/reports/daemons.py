"""Which daemons are up on this ledger: `agent-team daemons` and `GET /api/daemons`.

Each daemon keeps its own row (`db.daemons`: written at start, a heartbeat
every third of its lease time, a mark on a clean stop); what it holds is read
from the leases at the same moment: the singleton loops it makes the passes of
(live `loop:*` leases) and the tasks it runs (live `task:*` leases). A daemon
not seen for its own lease time is `gone` (killed, frozen, or cut off from the
database: the same time after which its tasks may be taken over), one that
stopped cleanly `stopped`, any other `up`. One function, so the CLI and the
API never disagree about which is which.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from agent_team import db

__all__ = ["DaemonView", "DaemonsReport", "daemon_status", "daemons_report"]

DaemonStatus = Literal["up", "gone", "stopped"]
_ORDER: dict[str, int] = {"up": 0, "gone": 1, "stopped": 2}
_LOOP, _TASK = "loop:", "task:"


@dataclass(frozen=True, slots=True)
class DaemonView:
    """One daemon as people read it."""

    instance_id: str
    host: str
    pid: int
    version: str
    url: str | None
    status: DaemonStatus
    started_at: str
    last_seen_at: str
    stopped_at: str | None
    lease_s: float
    seen_s_ago: float  # seconds since its last heartbeat (or its stop), at the report's time
    loops: tuple[str, ...]  # singleton loops it holds now (`timers`, `github-poller`, ...)
    tasks: tuple[str, ...]  # task ids it runs now

    def to_json(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "host": self.host,
            "pid": self.pid,
            "version": self.version,
            "url": self.url,
            "status": self.status,
            "started_at": self.started_at,
            "last_seen_at": self.last_seen_at,
            "stopped_at": self.stopped_at,
            "lease_s": self.lease_s,
            "seen_s_ago": self.seen_s_ago,
            "loops": list(self.loops),
            "tasks": list(self.tasks),
        }


@dataclass(frozen=True, slots=True)
class DaemonsReport:
    """Every daemon kept on the ledger at `at`: up first, then gone, then stopped."""

    at: str
    daemons: tuple[DaemonView, ...]

    def counts(self) -> dict[str, int]:
        found = dict.fromkeys(_ORDER, 0)
        for daemon in self.daemons:
            found[daemon.status] += 1
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "counts": self.counts(),
            "daemons": [daemon.to_json() for daemon in self.daemons],
        }


def daemon_status(row: db.DaemonRow, now: datetime) -> DaemonStatus:
    """`up`, `gone` (not seen for its own lease time) or `stopped` (a clean stop)."""
    if row.stopped_at is not None:
        return "stopped"
    if now - db.from_iso(row.last_seen_at) > timedelta(seconds=row.lease_s):
        return "gone"
    return "up"


def daemons_report(reader: db.Reader, now: datetime) -> DaemonsReport:
    """The daemons and what they hold, read from one view of the ledger (`reader`: a
    snapshot, so the rows and the leases agree)."""
    held: dict[str, tuple[list[str], list[str]]] = {}
    for lease in db.held_leases(reader, now=now):
        loops, tasks = held.setdefault(lease.owner or "", ([], []))
        if lease.name.startswith(_LOOP):
            loops.append(lease.name.removeprefix(_LOOP))
        elif lease.name.startswith(_TASK) and lease.name != _TASK:
            tasks.append(lease.name.removeprefix(_TASK))
    views = []
    for row in db.list_daemons(reader):
        status = daemon_status(row, now)
        # A gone daemon's leases run out by themselves (a loop's a little after it, its
        # interval later); until then they are its, and shown.
        loops, tasks = held.get(row.instance_id, ([], []))
        views.append(
            DaemonView(
                instance_id=row.instance_id,
                host=row.host,
                pid=row.pid,
                version=row.version,
                url=row.url,
                status=status,
                started_at=row.started_at,
                last_seen_at=row.last_seen_at,
                stopped_at=row.stopped_at,
                lease_s=row.lease_s,
                seen_s_ago=round(
                    max(0.0, (now - db.from_iso(row.last_seen_at)).total_seconds()), 3
                ),
                loops=tuple(sorted(loops)),
                tasks=tuple(sorted(tasks)),
            )
        )
    views.sort(key=lambda view: (_ORDER[view.status], view.started_at, view.instance_id))
    return DaemonsReport(at=db.to_iso(now), daemons=tuple(views))
