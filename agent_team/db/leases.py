"""Execution leases: one holder at a time for a task's run or a singleton loop, with an epoch.

A lease is a row `(name, owner, epoch, lease_until)`; `name` is `task:<id>`
for a task's graph run and `loop:<name>` for a loop that must run on one
instance at a time. It is taken when nobody holds it or its holder's time ran
out; every acquisition by a new holder (and every re-acquisition after a
lapse) increments the epoch, so a holder that was paused past its lease finds
its `Fence` stale and its writes refused (`fencing.check_fence`). Holders
renew while they work and release when done; a release keeps the epoch.

Times are the instances' own UTC clocks (NTP-synchronised hosts are assumed);
a lease of 30 s tolerates skew of a few seconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent_team.db.clock import to_iso, utc_now
from agent_team.db.fencing import Fence, counters
from agent_team.db.ledger import Ledger, Reader, Transaction
from agent_team.db.records import Lease, fetch_record, fetch_records
from agent_team.exceptions import LedgerInputError

__all__ = [
    "LeaseSummary",
    "acquire_lease",
    "get_lease",
    "give_up_lease",
    "held_leases",
    "lease_owners",
    "lease_summary",
    "list_leases",
    "release_lease",
    "release_leases_of",
    "renew_leases",
    "take_lease",
    "task_lease_name",
]


def task_lease_name(task_id: str) -> str:
    return f"task:{task_id}"


# What the retention pass keeps of the task leases it deletes (`db.retention`): their
# takeovers, and in `epoch` the highest epoch any of them reached. A task id is never empty
# (`create_task`), so no task's lease is named this.
TASK_LEASE_TALLY = task_lease_name("")


def _epoch_floor(tx: Transaction, name: str) -> int:
    """Where a new row's epochs start from: above every deleted task lease's, so an epoch
    never goes back for a task whose lease row retention removed (seed 001)."""
    if not name.startswith(TASK_LEASE_TALLY) or name == TASK_LEASE_TALLY:
        return 0
    row = tx.fetch_one("SELECT epoch FROM leases WHERE name = ?", (TASK_LEASE_TALLY,))
    return int(row["epoch"]) if row is not None else 0


def _window(lease_s: float, now: datetime | None) -> tuple[str, str]:
    if lease_s <= 0:
        raise LedgerInputError(f"a lease needs a positive duration, not {lease_s}")
    moment = now or utc_now()
    return to_iso(moment), to_iso(moment + timedelta(seconds=lease_s))


def take_lease(
    tx: Transaction, name: str, owner: str, now_iso: str, until_iso: str
) -> Fence | None:
    """Inside a write transaction: take or renew `name` for `owner`; None if it is held."""
    row = tx.fetch_one("SELECT owner, epoch, lease_until FROM leases WHERE name = ?", (name,))
    if row is None:
        first = _epoch_floor(tx, name) + 1
        cur = tx.execute(
            "INSERT INTO leases (name, owner, epoch, lease_until, acquired_at, renewed_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
            (name, owner, first, until_iso, now_iso, now_iso),
        )
        return Fence(name, owner, first) if cur.rowcount == 1 else None
    holder, epoch, until = row["owner"], int(row["epoch"]), row["lease_until"]
    live = holder is not None and until is not None and until > now_iso
    if live and holder == owner:
        tx.execute(
            "UPDATE leases SET lease_until = ?, renewed_at = ? WHERE name = ?",
            (until_iso, now_iso, name),
        )
        return Fence(name, owner, epoch)
    if live:
        return None
    takeover = holder is not None  # it lapsed while held: the holder died or stalled
    cur = tx.execute(
        "UPDATE leases SET owner = ?, epoch = epoch + 1, lease_until = ?, acquired_at = ?, "
        "renewed_at = ?, takeovers = takeovers + ? WHERE name = ? AND epoch = ?",
        (owner, until_iso, now_iso, now_iso, int(takeover), name, epoch),
    )
    if cur.rowcount != 1:
        return None
    if takeover:
        counters.count_takeover()
    return Fence(name, owner, epoch + 1)


def acquire_lease(
    ledger: Ledger, *, name: str, owner: str, lease_s: float, now: datetime | None = None
) -> Fence | None:
    """Take `name` for `lease_s` seconds (or renew it if `owner` holds it); None if held."""
    now_iso, until_iso = _window(lease_s, now)
    return ledger.write(lambda tx: take_lease(tx, name, owner, now_iso, until_iso))


def renew_leases(
    ledger: Ledger, fences: Iterable[Fence], *, lease_s: float, now: datetime | None = None
) -> set[str]:
    """Extend the leases still held under these fences, and the owner's command claims on them.

    Returns:
        The names still held; a missing name was taken over (its run will be fenced).
    """
    wanted = list(fences)
    now_iso, until_iso = _window(lease_s, now)

    def work(tx: Transaction) -> set[str]:
        held: set[str] = set()
        for fence in wanted:
            cur = tx.execute(
                "UPDATE leases SET lease_until = ?, renewed_at = ? "
                "WHERE name = ? AND owner = ? AND epoch = ? AND lease_until > ?",
                (until_iso, now_iso, fence.name, fence.owner, fence.epoch, now_iso),
            )
            if cur.rowcount != 1:
                continue
            held.add(fence.name)
            if fence.name.startswith("task:"):
                tx.execute(
                    "UPDATE commands SET lease_until = ? "
                    "WHERE task_id = ? AND state = 'claimed' AND claimed_by = ?",
                    (until_iso, fence.name.removeprefix("task:"), fence.owner),
                )
        return held

    return ledger.write(work) if wanted else set()


def release_lease(ledger: Ledger, fence: Fence) -> bool:
    """Give the lease up (the epoch stays, so the next holder's is higher); False if lost."""
    return ledger.write(lambda tx: give_up_lease(tx, fence))


def give_up_lease(tx: Transaction, fence: Fence) -> bool:
    """`release_lease` inside a transaction the caller is writing anyway."""
    return (
        tx.execute(
            "UPDATE leases SET owner = NULL, lease_until = NULL "
            "WHERE name = ? AND owner = ? AND epoch = ?",
            (fence.name, fence.owner, fence.epoch),
        ).rowcount
        == 1
    )


def release_leases_of(ledger: Ledger, owner: str) -> int:
    """Release every lease of an instance known to be dead (a crashed process on this host)."""
    return ledger.write(
        lambda tx: (
            tx.execute(
                "UPDATE leases SET owner = NULL, lease_until = NULL WHERE owner = ?", (owner,)
            ).rowcount
        )
    )


def get_lease(reader: Reader, name: str) -> Lease | None:
    return fetch_record(reader, Lease, "SELECT * FROM leases WHERE name = ?", (name,))


def list_leases(reader: Reader, *, owner: str | None = None, prefix: str = "") -> list[Lease]:
    """Leases by name, optionally one instance's or those whose name starts with `prefix`."""
    sql = "SELECT * FROM leases WHERE substr(name, 1, ?) = ?"
    params: list[object] = [len(prefix), prefix]
    if owner is not None:
        sql += " AND owner = ?"
        params.append(owner)
    return fetch_records(reader, Lease, sql + " ORDER BY name", params)


def held_leases(reader: Reader, *, now: datetime | None = None) -> list[Lease]:
    """The leases held now (an owner whose time has not run out), by name: what each
    instance runs (`task:`) and which singleton loops it makes the passes of (`loop:`).

    A released lease has no owner, so this reads the few held rows by `idx_leases_owner`,
    not every task lease the retention window keeps.
    """
    return fetch_records(
        reader,
        Lease,
        "SELECT * FROM leases WHERE owner IS NOT NULL AND lease_until > ? ORDER BY name",
        (to_iso(now or utc_now()),),
    )


def lease_owners(reader: Reader) -> set[str]:
    """The instances holding a lease now or whose lease ran out unreleased (`idx_leases_owner`).

    A released lease has no owner, so this reads the few held rows, not every
    task lease the retention window keeps (the recovery sweep asks it).
    """
    rows = reader.fetch_all("SELECT DISTINCT owner FROM leases WHERE owner IS NOT NULL")
    return {str(row["owner"]) for row in rows}


@dataclass(frozen=True)
class LeaseSummary:
    """What `/metrics` shows of the leases: who runs how many tasks, how often leases moved."""

    running_by_owner: dict[str, int] = field(default_factory=dict)
    takeovers_by_kind: dict[str, int] = field(default_factory=dict)  # `task`, `loop`


def lease_summary(reader: Reader, *, now: datetime | None = None) -> LeaseSummary:
    """Tasks running per instance now (live `task:` leases), and takeovers of each kind ever."""
    now_iso = to_iso(now or utc_now())
    running = reader.fetch_all(
        "SELECT owner, count(*) AS n FROM leases WHERE owner IS NOT NULL "
        "AND lease_until > ? AND substr(name, 1, 5) = 'task:' GROUP BY owner",
        (now_iso,),
    )
    moved = reader.fetch_all(
        "SELECT CASE WHEN substr(name, 1, 5) = 'task:' THEN 'task' ELSE 'loop' END AS kind, "
        "sum(takeovers) AS n FROM leases GROUP BY 1"
    )
    return LeaseSummary(
        running_by_owner={str(row["owner"]): int(row["n"]) for row in running},
        takeovers_by_kind={str(row["kind"]): int(row["n"] or 0) for row in moved},
    )
