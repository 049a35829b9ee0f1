"""Reads the GitHub intake needs beyond the shared intake functions.

The recovery sweep looks for claims (`ingested_issues`) whose task was never
created: a process that died between the claim and `start_task`.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_team.db.ledger import Reader

__all__ = ["IssueClaim", "list_issue_claims", "task_ids_by_source"]


@dataclass(frozen=True, slots=True)
class IssueClaim:
    source: str
    issue_id: str
    ingested_at: str


def list_issue_claims(
    ledger: Reader, *, source_prefix: str, claimed_before: str | None = None
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
    rows = ledger.fetch_all(sql + " ORDER BY ingested_at, source, issue_id", params)
    return [IssueClaim(row["source"], row["issue_id"], row["ingested_at"]) for row in rows]


def task_ids_by_source(ledger: Reader, *, source: str) -> set[str]:
    """Ids of every task that came from `source` (e.g. `github`)."""
    rows = ledger.fetch_all("SELECT id FROM tasks WHERE source = ?", (source,))
    return {str(row["id"]) for row in rows}
