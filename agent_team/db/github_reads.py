"""Reads the GitHub intake needs beyond the shared intake functions.

The recovery sweep looks for claims (`ingested_issues`) whose task was never
created: a process that died between the claim and `start_task`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from agent_team.db.connection import fetch_all

__all__ = ["IssueClaim", "list_issue_claims", "task_ids_by_source"]


@dataclass(frozen=True, slots=True)
class IssueClaim:
    source: str
    issue_id: str
    ingested_at: str


def list_issue_claims(
    conn: sqlite3.Connection, *, source_prefix: str, claimed_before: str | None = None
) -> list[IssueClaim]:
    """Claims whose source starts with `source_prefix` (e.g. `github:`), oldest first.

    Args:
        claimed_before: an ISO time; only claims taken before it (skips claims
            another thread is still turning into a task).
    """
    like = source_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    sql = (
        "SELECT source, issue_id, ingested_at FROM ingested_issues WHERE source LIKE ? ESCAPE '\\'"
    )
    params: tuple[str, ...] = (like,)
    if claimed_before is not None:
        sql += " AND ingested_at < ?"
        params += (claimed_before,)
    rows = fetch_all(conn, sql + " ORDER BY ingested_at, source, issue_id", params)
    return [IssueClaim(row["source"], row["issue_id"], row["ingested_at"]) for row in rows]


def task_ids_by_source(conn: sqlite3.Connection, *, source: str) -> set[str]:
    """Ids of every task that came from `source` (e.g. `github`)."""
    rows = fetch_all(conn, "SELECT id FROM tasks WHERE source = ?", (source,))
    return {str(row["id"]) for row in rows}
