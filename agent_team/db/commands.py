"""The durable commands inbox: how answers, the CLI and the daemon ask the coordinator to act.

A consumer claims commands with a lease; if it dies, the lease runs out and
another consumer claims them again (at-least-once). Handlers are therefore
idempotent, and `command_id` makes enqueueing idempotent too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from agent_team.db.audit import AuditEntry, append_audit
from agent_team.db.clock import to_iso, utc_now
from agent_team.db.fencing import Fence
from agent_team.db.leases import give_up_lease, take_lease, task_lease_name
from agent_team.db.ledger import Dialect, Ledger, Reader, Transaction, where_equal
from agent_team.db.records import Command, fetch_record, fetch_records, row_to
from agent_team.db.validate import require_member
from agent_team.db.wakeups import announce_commands
from agent_team.exceptions import LedgerInputError
from agent_team.task_model import CommandKind, CommandState

__all__ = [
    "Claim",
    "claim_commands",
    "claim_runs",
    "complete_command",
    "enqueue_command",
    "fail_command",
    "get_command",
    "insert_command",
    "list_commands",
    "release_command",
]


def enqueue_command(
    ledger: Ledger,
    *,
    command_id: str,
    kind: str,
    task_id: str,
    payload: Mapping[str, Any] | None = None,
    audit: AuditEntry | None = None,
) -> bool:
    """Add a command unless one with this id exists (with its audit row, in one transaction).

    Returns:
        True if this call added it; False if `command_id` was already there
        (in any state: a finished command is not run again).
    """
    require_member(kind, CommandKind, "command kind")
    try:
        payload_json = json.dumps(dict(payload or {}), sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise LedgerInputError(f"command payload is not JSON-serialisable: {exc}") from exc

    def work(tx: Transaction) -> bool:
        if not insert_command(tx, ledger.dialect, command_id, kind, task_id, payload_json):
            return False
        if audit is not None:
            append_audit(tx, audit)
        return True

    return ledger.write(work)


def insert_command(
    tx: Transaction, dialect: Dialect, command_id: str, kind: str, task_id: str, payload_json: str
) -> bool:
    """Inside a write: queue a command unless its id exists, and wake the other instances.

    Its time is taken inside the transaction (under SQLite's write lock), so commands
    keep commit order: a resume never overtakes a cancel queued before it.
    """
    cur = tx.execute(
        "INSERT INTO commands (command_id, kind, task_id, payload_json, state, created_at) "
        "VALUES (?, ?, ?, ?, 'pending', ?) ON CONFLICT (command_id) DO NOTHING",
        (command_id, kind, task_id, payload_json, to_iso(utc_now())),
    )
    if cur.rowcount != 1:
        return False
    announce_commands(tx, dialect)
    return True


@dataclass(frozen=True, slots=True)
class Claim:
    """A claimed command and the fence of its task's execution lease, taken together."""

    command: Command
    fence: Fence


def claim_runs(ledger: Ledger, *, consumer: str, limit: int, lease_s: float) -> list[Claim]:
    """Claim up to `limit` runnable commands, oldest first, with their tasks' execution leases.

    Runnable: pending, or claimed by anyone whose claim ran out, for a task whose
    lease is free, lapsed or already `consumer`'s: one task runs on one instance
    at a time, so `agent-team tick` beside a daemon, or a second daemon on the
    same PostgreSQL database, never runs a task twice. A lapsed lease taken
    over gets the next epoch, which fences the old holder's writes. Each claim
    counts one attempt; commands and leases run out after `lease_s` seconds
    unless renewed (`leases.renew_leases`). On PostgreSQL concurrent claimers
    skip each other's rows (`FOR UPDATE SKIP LOCKED`).
    """
    if limit < 1 or lease_s <= 0:
        raise LedgerInputError("claim_commands needs limit >= 1 and lease_s > 0")
    now = utc_now()
    now_iso, lease_iso = to_iso(now), to_iso(now + timedelta(seconds=lease_s))
    skip_locked = ledger.dialect.skip_locked

    runnable = (
        "SELECT c.command_id, c.task_id FROM commands c WHERE (c.state = 'pending' "
        "OR (c.state = 'claimed' AND c.lease_until <= ?)) AND NOT EXISTS ("
        "SELECT 1 FROM commands o WHERE o.task_id = c.task_id AND o.state = 'claimed' "
        "AND o.lease_until > ? AND o.claimed_by != ?) AND NOT EXISTS ("
        "SELECT 1 FROM leases l WHERE l.name = 'task:' || c.task_id "
        "AND l.owner IS NOT NULL AND l.owner != ? AND l.lease_until > ?) "
        "ORDER BY c.created_at, c.rowid LIMIT ?"
    )
    params = (now_iso, now_iso, consumer, consumer, now_iso, limit)
    # Most passes find nothing (every wake-up and poll asks): a read says so without a
    # write transaction and its fsync. Work queued after this read wakes the worker again.
    if not ledger.fetch_all(runnable, (*params[:-1], 1)):
        return []

    def work(tx: Transaction) -> list[Claim]:
        rows = tx.fetch_all(runnable + skip_locked, params)
        fences: dict[str, Fence | None] = {}
        claimed: list[Claim] = []
        for row in rows:
            task_id = str(row["task_id"])
            if task_id not in fences:
                fences[task_id] = take_lease(
                    tx, task_lease_name(task_id), consumer, now_iso, lease_iso
                )
            fence = fences[task_id]
            if fence is None:
                continue  # taken by another claimer since the SELECT
            tx.execute(
                "UPDATE commands SET state = 'claimed', claimed_by = ?, lease_until = ?, "
                "attempts = attempts + 1 WHERE command_id = ?",
                (consumer, lease_iso, row["command_id"]),
            )
            found = tx.fetch_one(
                "SELECT * FROM commands WHERE command_id = ?", (row["command_id"],)
            )
            assert found is not None  # same transaction
            claimed.append(Claim(row_to(Command, found), fence))
        return claimed

    return ledger.write(work)


def claim_commands(ledger: Ledger, *, consumer: str, limit: int, lease_s: float) -> list[Command]:
    """`claim_runs` for callers that need only the commands (the leases are taken all the same)."""
    return [
        claim.command
        for claim in claim_runs(ledger, consumer=consumer, limit=limit, lease_s=lease_s)
    ]


def _finish(
    ledger: Ledger,
    command_id: str,
    consumer: str | None,
    set_sql: str,
    params: tuple[object, ...],
    *,
    runnable: bool = False,
    release: Fence | None = None,
) -> bool:
    owner_sql = " AND claimed_by = ?" if consumer is not None else ""
    owner = (consumer,) if consumer is not None else ()
    sql = f"UPDATE commands SET {set_sql} WHERE command_id = ? AND state = 'claimed'{owner_sql}"

    def work(tx: Transaction) -> bool:
        if tx.execute(sql, (*params, command_id, *owner)).rowcount != 1:
            return False
        if runnable:  # handed back: any instance may run it now
            announce_commands(tx, ledger.dialect)
        if release is not None:
            give_up_lease(tx, release)
        return True

    return ledger.write(work)


def complete_command(
    ledger: Ledger, *, command_id: str, consumer: str | None = None, release: Fence | None = None
) -> bool:
    """claimed -> done. With `consumer`, only if that consumer still holds the claim.

    With `release`, the task's lease is given up in the same transaction (the
    worker's last command of a run): one commit where there were two. Nothing is
    released when the claim was lost (False); the caller releases as before.
    """
    return _finish(
        ledger,
        command_id,
        consumer,
        "state = 'done', done_at = ?, lease_until = NULL",
        (to_iso(utc_now()),),
        release=release,
    )


def fail_command(
    ledger: Ledger,
    *,
    command_id: str,
    error: str,
    retry: bool = False,
    consumer: str | None = None,
) -> bool:
    """Record a failed attempt and keep its error.

    With `retry`, the command goes back to pending for another claim;
    otherwise it is `failed` for good (attempts stay counted either way).
    """
    state = CommandState.PENDING if retry else CommandState.FAILED
    done_at = None if retry else to_iso(utc_now())
    return _finish(
        ledger,
        command_id,
        consumer,
        "state = ?, error = ?, done_at = ?, lease_until = NULL, "
        "claimed_by = CASE WHEN ? THEN NULL ELSE claimed_by END",
        (state.value, error, done_at, retry),
        runnable=retry,
    )


def release_command(ledger: Ledger, *, command_id: str, consumer: str) -> bool:
    """claimed -> pending without waiting for the lease, for claims of a consumer known dead.

    The recovery sweep uses this after a crash of a process on this host, so a
    restart picks its work up at once instead of after the lease runs out.
    """
    return _finish(
        ledger,
        command_id,
        consumer,
        "state = 'pending', claimed_by = NULL, lease_until = NULL",
        (),
        runnable=True,
    )


def get_command(ledger: Reader, command_id: str) -> Command | None:
    return fetch_record(
        ledger, Command, "SELECT * FROM commands WHERE command_id = ?", (command_id,)
    )


def list_commands(
    ledger: Reader, *, task_id: str | None = None, state: str | None = None
) -> list[Command]:
    """Commands oldest first, optionally for one task or in one state."""
    if state is not None:
        require_member(state, CommandState, "command state")
    where, params = where_equal({"task_id": task_id, "state": state})
    return fetch_records(
        ledger, Command, f"SELECT * FROM commands {where} ORDER BY created_at, rowid", params
    )
