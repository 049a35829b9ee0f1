"""Rows of a SQLite query by column name, whatever row factory the connection has.

Shared by the SQLite ledger and the fenced LangGraph saver, which reads on its
own connection inside its write; apart from both so neither imports the other.
"""

from __future__ import annotations

import sqlite3

from agent_team.db.ledger import Params, Row

__all__ = ["fetch_rows"]


def fetch_rows(conn: sqlite3.Connection, sql: str, params: Params) -> list[Row]:
    """Rows by column name, whatever row factory the connection has."""
    cur = conn.cursor()
    cur.row_factory = sqlite3.Row
    try:
        return list(cur.execute(sql, params).fetchall())
    finally:
        cur.close()
