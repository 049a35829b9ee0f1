"""`idempotency_keys`: a caller's `Idempotency-Key` and the task its first request made.

Why a table and not a task id derived from the key: a key means "the same
request" for 24 hours only (as Stripe's do), after which the caller may use it
again for a new task; and a retry with a different body must be told apart,
which needs what the first request asked for (`fingerprint`). The row goes in
the task's own transaction, so a retry arriving at the same moment, on another
daemon or after a restart finds either nothing (and its transaction waits,
then sees the row) or the row and its task, never a second task.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from agent_team.db.audit import AuditEntry
from agent_team.db.clock import to_iso
from agent_team.db.ledger import Ledger, Transaction, write_statement
from agent_team.db.tasks import StartCommand, check_new_task, insert_task
from agent_team.exceptions import LedgerInputError

__all__ = [
    "KEY_WINDOW",
    "MAX_KEY_CHARS",
    "IdempotencyKey",
    "KeptRequest",
    "create_task_once",
    "prune_idempotency_keys",
]

# How long a key names one request; the retention pass forgets it afterwards.
KEY_WINDOW = timedelta(hours=24)
MAX_KEY_CHARS = 255


@dataclass(frozen=True, slots=True)
class IdempotencyKey:
    """`key` as `scope` (the caller) sent it, and a digest of what its request asked for."""

    scope: str
    key: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class KeptRequest:
    """The task a key names; `created`: this call made it (else an earlier request did)."""

    task_id: str
    fingerprint: str
    created: bool


def create_task_once(
    ledger: Ledger,
    key: IdempotencyKey,
    *,
    now: datetime,
    task_id: str,
    kind: str,
    title: str,
    body: str = "",
    source: str = "cli",
    source_ref: str | None = None,
    audit: AuditEntry | None = None,
    start: StartCommand | None = None,
) -> KeptRequest:
    """`create_task` under `key`, in one transaction: unless the key already names a task
    (made less than `KEY_WINDOW` before `now`), record the key and make the task.

    Returns the task the key names and the fingerprint its first request had; the
    caller compares it with its own (a different request under the same key).
    """
    if not key.scope or not key.key or len(key.key) > MAX_KEY_CHARS or not key.fingerprint:
        raise LedgerInputError(f"an idempotency key needs a scope, 1 to {MAX_KEY_CHARS} chars")
    check_new_task(task_id, kind, title)
    stamp = to_iso(now)
    expired_before = to_iso(now - KEY_WINDOW)

    def work(tx: Transaction) -> KeptRequest:
        # A row older than the window is taken over: the key may name a new request now.
        claimed = tx.execute(
            "INSERT INTO idempotency_keys (scope, idem_key, fingerprint, task_id, created_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (scope, idem_key) DO UPDATE SET "
            "fingerprint = excluded.fingerprint, task_id = excluded.task_id, "
            "created_at = excluded.created_at WHERE idempotency_keys.created_at < ?",
            (key.scope, key.key, key.fingerprint, task_id, stamp, expired_before),
        ).rowcount
        if not claimed:
            row = tx.fetch_one(
                "SELECT task_id, fingerprint FROM idempotency_keys "
                "WHERE scope = ? AND idem_key = ?",
                (key.scope, key.key),
            )
            assert row is not None  # the conflict was with it, in this transaction
            return KeptRequest(str(row["task_id"]), str(row["fingerprint"]), created=False)
        insert_task(
            tx,
            ledger.dialect,
            task_id=task_id,
            kind=kind,
            title=title,
            body=body,
            source=source,
            source_ref=source_ref,
            audit=audit,
            start=start,
        )
        return KeptRequest(task_id, key.fingerprint, created=True)

    return ledger.write_together(work)


def prune_idempotency_keys(ledger: Ledger, *, older_than: datetime) -> int:
    """Forget keys recorded before `older_than` (the retention pass); returns how many."""
    return write_statement(
        ledger, "DELETE FROM idempotency_keys WHERE created_at < ?", (to_iso(older_than),)
    )
