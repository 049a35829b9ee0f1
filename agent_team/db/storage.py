"""How much room the ledger takes, and giving back what pruning freed.

SQLite keeps deleted pages on its freelist and reuses them, but the file only
shrinks when they are removed from it. `VACUUM` would rewrite the whole file
under an exclusive lock, so new ledger files are made with
`auto_vacuum = INCREMENTAL` (see `sqlite_ledger`) and `reclaim_space` trims
the freelist in one short write transaction. PostgreSQL's autovacuum makes
deleted rows' room reusable by itself; there is nothing to do there.
"""

from __future__ import annotations

from agent_team.db.ledger import Ledger, Transaction

__all__ = ["INCREMENTAL", "auto_vacuum_mode", "reclaim_space", "storage_bytes"]

# `PRAGMA auto_vacuum`: 0 none, 1 full, 2 incremental.
INCREMENTAL = 2

# The most pages one pass gives back (4 KiB each: 40 MiB), so the write lock is held for
# well under a second; what is left goes in the next pass.
_MAX_PAGES = 10_000


def auto_vacuum_mode(ledger: Ledger) -> int | None:
    """SQLite's `auto_vacuum` mode of the ledger file; None on a backend without one."""
    if ledger.dialect.name != "sqlite":
        return None
    row = ledger.fetch_one("PRAGMA auto_vacuum")
    return int(row[0]) if row is not None else 0


def reclaim_space(ledger: Ledger, *, max_pages: int = _MAX_PAGES) -> int:
    """Remove free pages from the end of an incremental-vacuum SQLite file.

    Returns:
        How many pages were given back (0 on PostgreSQL, or on a file made
        without incremental vacuum: there the pages stay free for reuse).
    """
    if auto_vacuum_mode(ledger) != INCREMENTAL:
        return 0

    def work(tx: Transaction) -> int:
        row = tx.fetch_one("PRAGMA freelist_count")
        free = min(int(row[0]) if row is not None else 0, max_pages)
        # Each step of the pragma frees one page and reports a row with no columns, which
        # Python's sqlite3 takes as the end of the statement: so step it once per page.
        for _ in range(free):
            tx.execute("PRAGMA incremental_vacuum")
        return free

    return ledger.write(work)


def storage_bytes(ledger: Ledger) -> dict[str, int]:
    """Bytes each table takes with its indexes, every table in the ledger's database.

    That includes LangGraph's checkpoint tables, which share the database. On
    SQLite this needs the `dbstat` table (most builds have it); without it the
    answer is empty.
    """
    if ledger.dialect.name == "sqlite":
        if ledger.fetch_one("SELECT 1 FROM pragma_module_list WHERE name = 'dbstat'") is None:
            return {}
        rows = ledger.fetch_all(
            "SELECT COALESCE(m.tbl_name, s.name) AS tbl, SUM(s.pgsize) AS bytes "
            "FROM dbstat AS s LEFT JOIN sqlite_master AS m ON m.name = s.name "
            "GROUP BY tbl"
        )
        return {str(row["tbl"]): int(row["bytes"]) for row in rows}
    rows = ledger.fetch_all(
        "SELECT c.relname AS tbl, pg_total_relation_size(c.oid) AS bytes FROM pg_class AS c "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE c.relkind = 'r' AND n.nspname = current_schema()"
    )
    return {str(row["tbl"]): int(row["bytes"]) for row in rows}
