"""`daemons`: which daemon processes run on this ledger, and when each was last seen.

Why a table: several daemons may share one PostgreSQL ledger, each on its own
host, and an operator (or a monitor) must be able to ask any of them, or the
CLI beside none of them, which are up. Each daemon writes its row at start,
touches `last_seen_at` every third of its lease time (`daemon_heartbeat`) and marks
`stopped_at` on a clean stop; one that is killed simply stops being seen, and
a reader judges it `gone` once it has not been seen for its own `lease_s` (the
same time after which its task leases may be taken over). The loops and tasks
a daemon holds are its live leases (`db.held_leases`), not copies kept here.

The heartbeat is history, not a promise: it commits without waiting for the
disk (`flush=False`, docs/architecture.md §3), and one lost to a power cut only
makes a daemon look older than it is. The retention pass deletes rows not seen
for `DAEMON_KEPT`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from agent_team.db.clock import to_iso
from agent_team.db.ledger import Ledger, Reader, Transaction, write_statement
from agent_team.db.records import fetch_records
from agent_team.exceptions import LedgerInputError

__all__ = [
    "DAEMON_KEPT",
    "DaemonRow",
    "DaemonStart",
    "daemon_heartbeat",
    "daemon_stopped",
    "list_daemons",
    "prune_daemons",
    "register_daemon",
]

# How long the row of a daemon that stopped or vanished is kept (then the retention pass
# deletes it): a week of restarts, as long as the seen events.
DAEMON_KEPT = timedelta(days=7)
_MAX_TEXT = 500


@dataclass(frozen=True, slots=True)
class DaemonRow:
    """One daemon as its row stores it (times are the ledger's UTC text)."""

    instance_id: str
    host: str
    pid: int
    version: str
    url: str | None
    lease_s: float
    started_at: str
    last_seen_at: str
    stopped_at: str | None


@dataclass(frozen=True, slots=True)
class DaemonStart:
    """What a daemon says of itself when it starts (and again if its row went missing)."""

    instance_id: str
    host: str
    pid: int
    version: str
    url: str | None
    lease_s: float
    started_at: datetime


def _checked(daemon: DaemonStart) -> DaemonStart:
    for name in ("instance_id", "host", "version"):
        value = getattr(daemon, name)
        if not value or len(value) > _MAX_TEXT:
            raise LedgerInputError(f"a daemon's {name} must be 1 to {_MAX_TEXT} characters")
    if daemon.url is not None and len(daemon.url) > _MAX_TEXT:
        raise LedgerInputError(f"a daemon's url must be at most {_MAX_TEXT} characters")
    if daemon.pid < 0 or not daemon.lease_s > 0:
        raise LedgerInputError("a daemon needs a pid >= 0 and a positive lease_s")
    return daemon


def _insert(tx: Transaction, daemon: DaemonStart, seen: str) -> int:
    return tx.execute(
        "INSERT INTO daemons (instance_id, host, pid, version, url, lease_s, started_at, "
        "last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (instance_id) DO NOTHING",
        (
            daemon.instance_id,
            daemon.host,
            daemon.pid,
            daemon.version,
            daemon.url,
            daemon.lease_s,
            to_iso(daemon.started_at),
            seen,
        ),
    ).rowcount


def register_daemon(ledger: Ledger, daemon: DaemonStart, *, now: datetime) -> None:
    """Write a starting daemon's row, seen `now` (idempotent: a second call only touches it).

    Raises:
        LedgerInputError: an empty or over-long field, a negative pid, a lease of 0.
    """
    _checked(daemon)
    daemon_heartbeat(ledger, daemon, now=now)


def daemon_heartbeat(ledger: Ledger, daemon: DaemonStart, *, now: datetime) -> bool:
    """The daemon is alive at `now`: one history commit (`flush=False`).

    Writes the row again when it is missing (the ledger was away at start, or the
    retention pass deleted it after a very long stall). Returns False, writing
    nothing, once the daemon was marked stopped: a stopped instance is never up again
    (a restart is a new instance).
    """
    seen = to_iso(now)

    def work(tx: Transaction) -> bool:
        touched = tx.execute(
            "UPDATE daemons SET last_seen_at = ? WHERE instance_id = ? AND stopped_at IS NULL",
            (seen, daemon.instance_id),
        ).rowcount
        return bool(touched) or bool(_insert(tx, daemon, seen))

    return ledger.write(work, flush=False)


def daemon_stopped(ledger: Ledger, instance_id: str, *, now: datetime) -> bool:
    """Mark a daemon that stops cleanly (once; False if it had no row or was marked already).

    History too (`flush=False`): a mark lost to a power cut leaves the daemon `gone`,
    which a reader cannot tell apart from a stop anyway once the process is away.
    """
    stamp = to_iso(now)
    return bool(
        write_statement(
            ledger,
            "UPDATE daemons SET stopped_at = ?, last_seen_at = ? "
            "WHERE instance_id = ? AND stopped_at IS NULL",
            (stamp, stamp, instance_id),
            flush=False,
        )
    )


def list_daemons(reader: Reader) -> list[DaemonRow]:
    """Every daemon row kept, oldest start first (a tiny table: read whole)."""
    return fetch_records(
        reader, DaemonRow, "SELECT * FROM daemons ORDER BY started_at, instance_id"
    )


def prune_daemons(ledger: Ledger, *, older_than: datetime) -> int:
    """Forget daemons last seen before `older_than` (the retention pass); how many went."""
    return write_statement(
        ledger, "DELETE FROM daemons WHERE last_seen_at < ?", (to_iso(older_than),)
    )
