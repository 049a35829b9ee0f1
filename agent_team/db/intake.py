"""Intake de-dup: an outside issue becomes a task at most once.

The claim row is taken before the task is started and released if starting
fails (docs/architecture.md §4), so a crash between the two leaves a claim the recovery
sweep can finish.
"""

from __future__ import annotations

from agent_team.db.clock import to_iso, utc_now
from agent_team.db.ledger import Ledger, Reader, Transaction, write_statement

__all__ = ["delete_issue_ingested", "issue_already_ingested", "record_issue_ingested"]


def issue_already_ingested(ledger: Reader, *, source: str, issue_id: str | int) -> bool:
    row = ledger.fetch_one(
        "SELECT 1 FROM ingested_issues WHERE source = ? AND issue_id = ?",
        (source, str(issue_id)),
    )
    return row is not None


def record_issue_ingested(ledger: Ledger, *, source: str, issue_id: str | int) -> bool:
    """Claim an issue. True only for the one caller that claimed it first."""

    def work(tx: Transaction) -> bool:
        now = to_iso(utc_now())  # taken under the write lock, so times follow commit order
        cur = tx.execute(
            "INSERT INTO ingested_issues (source, issue_id, ingested_at) "
            "VALUES (?, ?, ?) ON CONFLICT (source, issue_id) DO NOTHING",
            (source, str(issue_id), now),
        )
        return cur.rowcount == 1

    return ledger.write(work)


def delete_issue_ingested(ledger: Ledger, *, source: str, issue_id: str | int) -> bool:
    """Release a claim so the next poll retries the issue. True if a claim was removed."""

    return (
        write_statement(
            ledger,
            "DELETE FROM ingested_issues WHERE source = ? AND issue_id = ?",
            (source, str(issue_id)),
        )
        == 1
    )
