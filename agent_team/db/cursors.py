"""The intake poller's cursor per (source, label): ETag, rate limit, back-off and counters.

Kept in the ledger, not in memory, so a restarted daemon still sends
`If-None-Match` (a cheap 304) and honours a back-off it was told about.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from agent_team.db.clock import to_iso, utc_now
from agent_team.db.connection import fetch_all, fetch_one, write_transaction
from agent_team.db.records import IntakeCursor, row_to

__all__ = ["get_cursor", "list_cursors", "record_poll"]


def get_cursor(conn: sqlite3.Connection, *, source: str, label: str) -> IntakeCursor | None:
    row = fetch_one(
        conn, "SELECT * FROM intake_cursors WHERE source = ? AND label = ?", (source, label)
    )
    return None if row is None else row_to(IntakeCursor, row)


def list_cursors(conn: sqlite3.Connection) -> list[IntakeCursor]:
    rows = fetch_all(conn, "SELECT * FROM intake_cursors ORDER BY source, label")
    return [row_to(IntakeCursor, row) for row in rows]


def record_poll(
    conn: sqlite3.Connection,
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

    def work(db: sqlite3.Connection) -> IntakeCursor:
        db.execute(
            "INSERT OR IGNORE INTO intake_cursors (source, label) VALUES (?, ?)", (source, label)
        )
        db.execute(
            "UPDATE intake_cursors SET "
            "etag = CASE WHEN ? THEN etag ELSE ? END, last_poll_at = ?, last_status = ?, "
            "polls = polls + 1, not_modified = not_modified + ?, "
            "tasks_created = tasks_created + ?, rate_remaining = COALESCE(?, rate_remaining), "
            "rate_reset_at = COALESCE(?, rate_reset_at), next_poll_at = ?, "
            "failures = CASE WHEN ? IS NULL THEN 0 ELSE failures + 1 END, last_error = ? "
            "WHERE source = ? AND label = ?",
            (
                int(keep_etag), etag, to_iso(now or utc_now()), status, int(not_modified),
                tasks_created, rate_remaining, to_iso(rate_reset_at) if rate_reset_at else None,
                to_iso(next_poll_at) if next_poll_at else None, error, error, source, label,
            ),
        )  # fmt: skip
        row = fetch_one(
            db, "SELECT * FROM intake_cursors WHERE source = ? AND label = ?", (source, label)
        )
        assert row is not None  # same transaction
        return row_to(IntakeCursor, row)

    return write_transaction(conn, work)
