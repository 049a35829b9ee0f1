"""Intake de-dup: an outside issue becomes a task at most once.

The claim row is taken before the task is started and released if starting
fails (DESIGN.md §4), so a crash between the two leaves a claim the recovery
sweep can finish.
"""

from __future__ import annotations

import sqlite3

from agent_team.db.clock import to_iso, utc_now
from agent_team.db.connection import fetch_one, write_transaction

__all__ = ["delete_issue_ingested", "issue_already_ingested", "record_issue_ingested"]


def issue_already_ingested(conn: sqlite3.Connection, *, source: str, issue_id: str | int) -> bool:
    row = fetch_one(
        conn,
        "SELECT 1 FROM ingested_issues WHERE source = ? AND issue_id = ?",
        (source, str(issue_id)),
    )
    return row is not None


def record_issue_ingested(conn: sqlite3.Connection, *, source: str, issue_id: str | int) -> bool:
    """Claim an issue. True only for the one caller that claimed it first."""

    def work(db: sqlite3.Connection) -> bool:
        now = to_iso(utc_now())  # taken under the write lock, so times follow commit order
        cur = db.execute(
            "INSERT OR IGNORE INTO ingested_issues (source, issue_id, ingested_at) "
            "VALUES (?, ?, ?)",
            (source, str(issue_id), now),
        )
        return cur.rowcount == 1

    return write_transaction(conn, work)


def delete_issue_ingested(conn: sqlite3.Connection, *, source: str, issue_id: str | int) -> bool:
    """Release a claim so the next poll retries the issue. True if a claim was removed."""

    def work(db: sqlite3.Connection) -> bool:
        cur = db.execute(
            "DELETE FROM ingested_issues WHERE source = ? AND issue_id = ?",
            (source, str(issue_id)),
        )
        return cur.rowcount == 1

    return write_transaction(conn, work)
