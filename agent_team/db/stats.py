"""Row counts for `agent-team migrate` and health output."""

from __future__ import annotations

from agent_team.db.ledger import Ledger
from agent_team.db.schema import LEDGER_TABLES

__all__ = ["table_counts"]


def table_counts(ledger: Ledger) -> dict[str, int]:
    """Rows per ledger table (tables that do not exist yet are left out)."""
    present = {row[0] for row in ledger.execute(ledger.dialect.list_tables).fetchall()}
    return {
        table: int(ledger.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
        for table in LEDGER_TABLES
        if table in present
    }
