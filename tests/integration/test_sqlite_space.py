"""SQLite only: the retention pass's query plan, and the room a prune gives back to the disk.

New ledger files are made with `auto_vacuum = INCREMENTAL` (the mode is fixed
once the first table exists), so `db.reclaim_space` can trim the freelist
without a `VACUUM`; older files keep their mode and reuse freed pages instead.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from agent_team import db


def test_the_work_list_reads_the_partial_index_on_sqlite(conn: db.Ledger) -> None:
    rows = conn.fetch_all(
        "EXPLAIN QUERY PLAN SELECT * FROM tasks WHERE checkpoints_pruned_at IS NULL "
        "AND status IN ('done', 'failed', 'cancelled') AND updated_at < ? LIMIT ?",
        ("2030-01-01", 200),
    )
    assert any("idx_tasks_unpruned" in str(row["detail"]) for row in rows), [
        tuple(row) for row in rows
    ]


def test_an_older_ledger_file_keeps_its_mode_and_reclaims_nothing(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with closing(sqlite3.connect(path)) as raw:  # made before incremental vacuum
        raw.execute("CREATE TABLE scratch (x)")
        raw.commit()
    db.init_db(path)
    with db.open_ledger(path) as ledger:
        assert db.auto_vacuum_mode(ledger) == 0
        db.create_task(ledger, task_id="t", kind="code", title="x")
        assert db.reclaim_space(ledger) == 0


def test_reclaiming_gives_the_free_pages_back(conn: db.Ledger, ledger_file: Path) -> None:
    for n in range(300):
        db.create_task(conn, task_id=f"t{n}", kind="code", title="x", body="y" * 4000)
    conn.execute("DELETE FROM tasks")  # as a prune deletes checkpoint rows
    with closing(sqlite3.connect(ledger_file)) as raw:
        (pages,) = raw.execute("PRAGMA page_count").fetchone()
        (free,) = raw.execute("PRAGMA freelist_count").fetchone()
    assert free > 250

    assert db.reclaim_space(conn, max_pages=100) == 100  # bounded per pass
    assert db.reclaim_space(conn) == free - 100

    with closing(sqlite3.connect(ledger_file)) as raw:
        assert raw.execute("PRAGMA freelist_count").fetchone() == (0,)
        assert raw.execute("PRAGMA page_count").fetchone() == (pages - free,)
