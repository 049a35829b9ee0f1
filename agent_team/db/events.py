"""Inbound event de-dup: an outside event id is acted on once (Slack retries, GitHub redeliveries).

The claim is durable, so a redelivery after a restart is still recognised.
A failed action gives its id back (`release_event`), so the sender's
redelivery, which keeps the id, is acted on instead of answered "duplicate".
Old ids are pruned after a retention period (the senders retry for minutes
to hours, never for days).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from agent_team.db.clock import to_iso, utc_now
from agent_team.db.connection import fetch_one, write_transaction
from agent_team.exceptions import LedgerInputError

__all__ = ["claim_event", "event_seen", "prune_events", "release_event"]


def claim_event(
    conn: sqlite3.Connection, *, source: str, event_id: str, now: datetime | None = None
) -> bool:
    """Record that `event_id` from `source` arrived. True only for the first arrival."""
    if not source or not event_id:
        raise LedgerInputError("an event needs a source and an id")

    def work(db: sqlite3.Connection) -> bool:
        cur = db.execute(
            "INSERT OR IGNORE INTO seen_events (source, event_id, seen_at) VALUES (?, ?, ?)",
            (source, event_id, to_iso(now or utc_now())),
        )
        return cur.rowcount == 1

    return write_transaction(conn, work)


def event_seen(conn: sqlite3.Connection, *, source: str, event_id: str) -> bool:
    row = fetch_one(
        conn, "SELECT 1 FROM seen_events WHERE source = ? AND event_id = ?", (source, event_id)
    )
    return row is not None


def prune_events(conn: sqlite3.Connection, *, older_than: datetime) -> int:
    """Forget event ids seen before `older_than`; returns how many were removed."""

    def work(db: sqlite3.Connection) -> int:
        cur = db.execute("DELETE FROM seen_events WHERE seen_at < ?", (to_iso(older_than),))
        return cur.rowcount

    return write_transaction(conn, work)


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
