"""Intake writes beside the poll record: release a delivery id, forget an ETag, count a task.

The webhook claims `X-GitHub-Delivery` before it ingests (so a redelivery is a
duplicate); when starting the task fails it must give the id back, or
GitHub's redelivery (which keeps the id) would be answered "duplicate" and the
issue lost. A failed start also forgets the poller's stored ETag, so the next
poll is a full read that sees the issue again instead of a 304 that hides it.
Tasks the webhook creates count in the cursor's `tasks_created` (what
`agent-team intake status` shows) without counting as a poll.
"""

from __future__ import annotations

import sqlite3

from agent_team.db.connection import write_transaction
from agent_team.exceptions import LedgerInputError

__all__ = ["count_tasks_created", "forget_etag", "release_event"]


def release_event(conn: sqlite3.Connection, *, source: str, event_id: str) -> bool:
    """Forget that `event_id` from `source` arrived, so its redelivery is acted on.

    Returns:
        True if a claim was removed.
    """
    if not source or not event_id:
        raise LedgerInputError("an event needs a source and an id")

    def work(db: sqlite3.Connection) -> bool:
        cur = db.execute(
            "DELETE FROM seen_events WHERE source = ? AND event_id = ?", (source, event_id)
        )
        return cur.rowcount == 1

    return write_transaction(conn, work)


def forget_etag(conn: sqlite3.Connection, *, source: str, label: str | None = None) -> int:
    """Clear the stored ETag of `source`'s cursors (one label, or all of them).

    Counters, back-off and the last poll are left as they are; only the next
    poll's `If-None-Match` goes. Returns how many cursors changed.
    """

    def work(db: sqlite3.Connection) -> int:
        sql = "UPDATE intake_cursors SET etag = NULL WHERE source = ? AND etag IS NOT NULL"
        params: tuple[str, ...] = (source,)
        if label is not None:
            sql += " AND label = ?"
            params += (label,)
        return db.execute(sql, params).rowcount

    return write_transaction(conn, work)


def count_tasks_created(
    conn: sqlite3.Connection, *, source: str, label: str, count: int = 1
) -> None:
    """Add `count` to the `tasks_created` of `(source, label)`; nothing else changes.

    For tasks made outside a poll (the webhook). The cursor row is made if no
    poll has made it yet; its poll counters stay at zero.
    """
    if not source or not label:
        raise LedgerInputError("a cursor needs a source and a label")

    def work(db: sqlite3.Connection) -> None:
        db.execute(
            "INSERT OR IGNORE INTO intake_cursors (source, label) VALUES (?, ?)", (source, label)
        )
        db.execute(
            "UPDATE intake_cursors SET tasks_created = tasks_created + ? "
            "WHERE source = ? AND label = ?",
            (count, source, label),
        )

    write_transaction(conn, work)
