"""Row counts for `agent-team migrate` and health output."""

from __future__ import annotations

import sqlite3

from agent_team.db.schema import LEDGER_TABLES

__all__ = ["table_counts"]


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Rows per ledger table (tables that do not exist yet are left out)."""
    present = {
        row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    return {
        table: int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
        for table in LEDGER_TABLES
        if table in present
    }
