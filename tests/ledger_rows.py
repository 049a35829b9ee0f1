"""Every row a request could have written, so a test can say "nothing was stored" exactly.

Counting rows (`db.table_counts`) would miss an update in place (an answer
overwritten, a question reopened); this compares the rows themselves.
"""

from __future__ import annotations

from agent_team import db

__all__ = ["REQUEST_TABLES", "Rows", "row_counts", "stored_rows"]

# What an answer, a task, a delivery or an intake claim writes. Leases and intake
# cursors move on the daemon's own clocks and hold nothing a request brought.
REQUEST_TABLES = (
    "pending_questions",
    "tasks",
    "commands",
    "seen_events",
    "side_effects",
    "audit_log",
    "audit_head",
    "task_transitions",
    "ingested_issues",
    "idempotency_keys",
)

Rows = dict[str, list[tuple[str, ...]]]


def stored_rows(ledger: db.Ledger, tables: tuple[str, ...] = REQUEST_TABLES) -> Rows:
    """Each table's rows as text, sorted: equal before and after means nothing was written."""
    found: Rows = {}
    for table in tables:
        rows = ledger.execute(f"SELECT * FROM {table}").fetchall()
        found[table] = sorted(tuple(str(value) for value in row) for row in rows)
    return found


def row_counts(ledger: db.Ledger) -> dict[str, int]:
    """Rows per table, and answered questions: cheap enough for a fuzz test's every example."""
    counts = db.table_counts(ledger)
    counts["answered"] = len(db.list_questions(ledger, status="answered"))
    return counts
