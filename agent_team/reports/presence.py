"""Whether anything works on a ledger's tasks now: a daemon, or a `tick` in the middle of a run.

Why: the ledger keeps a task `running` or `queued` when the process that
ran it is gone, and a step's time keeps growing. `agent-team show` said
"running … so far" and `show --follow` waited, with no daemon at all; a
person needs to be told that nothing will move the task until one starts.

How we know, without asking anyone over the network:
- a SQLite ledger's daemon holds the kernel lock of its lock file
  (`db.daemon_holder`), released even by `kill -9`: that alone decides;
- on PostgreSQL, where daemons take no such lock, every daemon holds its
  singleton loops' leases (`loop:timers`, ...), renewed every pass and run
  out soon after it dies;
- a run in progress (a daemon's or `agent-team tick`'s) holds its task's
  lease (`task:<id>`), renewed while it runs.
None of them live: nothing runs. A database that cannot say (an error while
reading) is "cannot tell", never "not running".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from agent_team import db
from agent_team.exceptions import LedgerError
from agent_team.reports.daemons import daemon_status

__all__ = ["NO_DAEMON", "Presence", "daemon_presence"]

NO_DAEMON = (
    "no daemon is running on this ledger: start one with `agent-team daemon`, or `agent-team tick`"
)


@dataclass(frozen=True, slots=True)
class Presence:
    """`running`: something works on the ledger now; None when it cannot be told."""

    running: bool | None
    detail: str


def _live(lease: db.Lease, now: datetime) -> bool:
    return bool(lease.owner and lease.lease_until and db.from_iso(lease.lease_until) > now)


def daemon_presence(reader: db.Reader, target: Path | str, now: datetime) -> Presence:
    """Whether a daemon (or a `tick` run) works on the ledger at `target` now.

    Args:
        reader: the ledger (reads only).
        target: the ledger's target as the settings name it (a SQLite path or a URL).
        now: the clock the leases are compared with.
    """
    sqlite = isinstance(target, Path)
    if isinstance(target, Path):
        holder = db.daemon_holder(target)
        if holder is not None:
            return Presence(True, f"the daemon runs ({holder.describe()})")
    try:
        up = [row for row in db.list_daemons(reader) if daemon_status(row, now) == "up"]
        if up:  # its heartbeat has a loop of its own: a long pass never hides it
            return Presence(True, f"a daemon runs ({up[0].instance_id})")
        loops = (
            []
            if sqlite
            else [lease for lease in db.list_leases(reader, prefix="loop:") if _live(lease, now)]
        )
        runs = db.lease_summary(reader, now=now).running_by_owner
    except LedgerError as exc:
        return Presence(None, f"cannot tell whether a daemon runs ({exc})")
    if loops:
        return Presence(True, f"a daemon holds {loops[0].name}")
    if runs:
        return Presence(True, "a run holds a task's lease (a daemon or `agent-team tick`)")
    return Presence(False, NO_DAEMON)
