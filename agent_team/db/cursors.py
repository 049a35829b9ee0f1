"""The intake poller's cursor per (source, label): ETag, rate limit, back-off and counters.

Kept in the ledger, not in memory, so a restarted daemon still sends
`If-None-Match` (a cheap 304) and honours a back-off it was told about. A
failed task start forgets the ETag (`forget_etag`), so the next poll is a full
read that sees the issue again; tasks made outside a poll (the webhook) still
count (`count_tasks_created`).
"""

from __future__ import annotations

from datetime import datetime

from agent_team.db.clock import to_iso, utc_now
from agent_team.db.ledger import Ledger, Reader, Transaction
from agent_team.db.records import IntakeCursor, fetch_record, fetch_records, row_to
from agent_team.exceptions import LedgerInputError

__all__ = ["count_tasks_created", "forget_etag", "get_cursor", "list_cursors", "record_poll"]


def get_cursor(ledger: Reader, *, source: str, label: str) -> IntakeCursor | None:
    return fetch_record(
        ledger,
        IntakeCursor,
        "SELECT * FROM intake_cursors WHERE source = ? AND label = ?",
        (source, label),
    )


def list_cursors(ledger: Reader) -> list[IntakeCursor]:
    return fetch_records(
        ledger, IntakeCursor, "SELECT * FROM intake_cursors ORDER BY source, label"
    )


def record_poll(
    ledger: Ledger,
    *,
    source: str,
    label: str,
    status: int | None,
    etag: str | None = None,
    keep_etag: bool = False,
    not_modified: bool = False,
    tasks_created: int = 0,
    rate_remaining: int | None = None,
    rate_reset_at: datetime | None = None,
    next_poll_at: datetime | None = None,
    error: str | None = None,
    now: datetime | None = None,
) -> IntakeCursor:
    """Record one poll's outcome; counters add up, the rest is replaced.

    Args:
        keep_etag: leave the stored ETag as it is (a 304 or a failed poll).
        error: None for a successful poll (resets the failure count).
    """

    def work(tx: Transaction) -> IntakeCursor:
        tx.execute(
            "INSERT INTO intake_cursors (source, label) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (source, label),
        )
        tx.execute(
            "UPDATE intake_cursors SET "
            "etag = CASE WHEN ? THEN etag ELSE ? END, last_poll_at = ?, last_status = ?, "
            "polls = polls + 1, not_modified = not_modified + ?, "
            "tasks_created = tasks_created + ?, rate_remaining = COALESCE(?, rate_remaining), "
            "rate_reset_at = COALESCE(?, rate_reset_at), next_poll_at = ?, "
            "failures = CASE WHEN CAST(? AS TEXT) IS NULL THEN 0 ELSE failures + 1 END, "
            "last_error = ? "
            "WHERE source = ? AND label = ?",
            (
                bool(keep_etag),
                etag,
                to_iso(now or utc_now()),
                status,
                int(not_modified),
                tasks_created,
                rate_remaining,
                to_iso(rate_reset_at) if rate_reset_at else None,
                to_iso(next_poll_at) if next_poll_at else None,
                error,
                error,
                source,
                label,
            ),
        )
        row = tx.fetch_one(
            "SELECT * FROM intake_cursors WHERE source = ? AND label = ?", (source, label)
        )
        assert row is not None  # same transaction
        return row_to(IntakeCursor, row)

    return ledger.write(work)


def forget_etag(ledger: Ledger, *, source: str, label: str | None = None) -> int:
    """Clear the stored ETag of `source`'s cursors (one label, or all of them).

    Counters, back-off and the last poll are left as they are; only the next
    poll's `If-None-Match` goes. Returns how many cursors changed.
    """

    def work(tx: Transaction) -> int:
        sql = "UPDATE intake_cursors SET etag = NULL WHERE source = ? AND etag IS NOT NULL"
        params: tuple[str, ...] = (source,)
        if label is not None:
            sql += " AND label = ?"
            params += (label,)
        return tx.execute(sql, params).rowcount

    return ledger.write(work)


def count_tasks_created(ledger: Ledger, *, source: str, label: str, count: int = 1) -> None:
    """Add `count` to the `tasks_created` of `(source, label)`; nothing else changes.

    For tasks made outside a poll (the webhook). The cursor row is made if no
    poll has made it yet; its poll counters stay at zero.
    """
    if not source or not label:
        raise LedgerInputError("a cursor needs a source and a label")

    def work(tx: Transaction) -> None:
        tx.execute(
            "INSERT INTO intake_cursors (source, label) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (source, label),
        )
        tx.execute(
            "UPDATE intake_cursors SET tasks_created = tasks_created + ? "
            "WHERE source = ? AND label = ?",
            (count, source, label),
        )

    ledger.write(work)
