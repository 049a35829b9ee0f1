"""What a finished task costs to keep, before and after its checkpoints are pruned.

N tasks go through the whole offline pipeline (offline model, local
transport, offline builder), as bench/pipeline.py drives them: `start_task`,
`run_pending()` to the plan gate, `answer(..., "approve")`, `run_pending()`
to done. Then the coordinator's clock moves past the retention and
`prune_checkpoints()` runs until it has nothing left (at most
`CHECKPOINT_BATCH` tasks a pass, as the daemon does it).

Bytes are measured three times: on the empty ledger (right after start-up,
LangGraph's tables made), with the N tasks done, and after pruning.

- SQLite: the file after `PRAGMA wal_checkpoint(TRUNCATE)` (so the WAL is
  in it), which is `page_count * page_size`; per table (indexes included)
  from the `dbstat` table. A new ledger file is in `auto_vacuum =
  INCREMENTAL` mode, so the pass gives the freed pages back at once.
- PostgreSQL: `pg_total_relation_size` of every table (heap, TOAST,
  indexes, free space and visibility maps). A `DELETE` frees nothing by
  itself; autovacuum makes the room reusable and cuts empty pages off the
  end of a table, while B-tree indexes keep their emptied pages for new
  entries (reusable after a second pass). So every measurement but "pruned
  1, no VACUUM" follows two plain `VACUUM`s of each table (what autovacuum
  does over time; never `VACUUM FULL`), and that one shows the sizes right
  after the `DELETE`s.

Two cycles: N tasks done and pruned, then N more done and pruned. "Per
task" is (bytes - bytes of the empty ledger) / tasks so far: the fixed cost
of empty tables and indexes is left out and reported separately. The second
cycle's growth is the long-run figure: new checkpoints reuse the room the
first prune freed (on PostgreSQL, empty index pages and dead rows' space).
The goal is <= 4 KB (4096 bytes) per finished task after pruning.

    .venv/bin/python bench/retention.py                      # N = 200, SQLite and PostgreSQL
    .venv/bin/python bench/retention.py --n 50 --backend sqlite
    .venv/bin/python bench/retention.py --database-url postgresql://me@host/scratch

PostgreSQL needs `--database-url` (an empty scratch database: the bench
creates its tables there and leaves them) or, without it, Debian's server
packages, from which a throwaway server is started (tests/pg_server.py).
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOAL_BYTES = 4096
BODY = (
    "Remember the email address on the login page between visits, for this task.\n"
    "- Store it in a cookie\n"
    "- Prefill the field\n"
    "- Test both paths\n"
)
# LangGraph's tables, per backend; everything else in the database is our ledger.
CHECKPOINT_TABLES = {
    "sqlite": ("checkpoints", "writes"),
    "postgres": ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"),
}


class _Clock:
    """The coordinator's clock, moved past the retention by hand."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def _sqlite_file_bytes(path: Path) -> dict[str, int]:
    """The WAL folded in, then the file's size, pages and free pages."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()
    finally:
        conn.close()
    wal = path.with_name(path.name + "-wal")
    return {
        "file": path.stat().st_size + (wal.stat().st_size if wal.exists() else 0),
        "pages": pages * page_size,
        "free": free * page_size,
    }


def _postgres_vacuum(url: str, tables: list[str]) -> None:
    import psycopg

    # Twice: B-tree pages one VACUUM empties become reusable only in a later one, and
    # autovacuum comes back again and again; plain, never FULL (no table rewrite).
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(2):
            for table in tables:
                conn.execute(f"VACUUM {table}")


def _measure(
    coordinator: Any, backend: str, db_file: Path, *, vacuum_url: str | None = None
) -> dict[str, Any]:
    from agent_team import db

    if vacuum_url is not None:
        _postgres_vacuum(vacuum_url, sorted(db.storage_bytes(coordinator.ledger)))
    tables = db.storage_bytes(coordinator.ledger)
    taken: dict[str, Any] = {"tables": tables, "total": sum(tables.values())}
    if backend == "sqlite":
        taken.update(_sqlite_file_bytes(db_file))
        taken["total"] = taken["pages"]  # free and pointer-map pages count: they are on disk
    return taken


def _finish_tasks(coordinator: Any, n: int, cycle: int) -> None:
    """N tasks submitted, run to the plan gate, approved, run to done."""
    from agent_team import db

    conn = coordinator.ledger
    task_ids = [
        coordinator.start_task(title=f"Task {cycle}.{i}", body=BODY, source="bench")
        for i in range(n)
    ]
    while coordinator.run_pending():
        pass
    for task_id in task_ids:
        (question,) = db.list_questions(conn, status="open", thread_id=task_id)
        coordinator.answer(question.question_id, "approve", via="bench")
    while coordinator.run_pending():
        pass
    for task_id in task_ids:
        task = db.get_task(conn, task_id)
        if task is None or task.status != "done":
            raise SystemExit(f"task {task_id} is {task.status if task else 'missing'}, not done")


def _prune_all(coordinator: Any, clock: _Clock, retention: timedelta) -> list[tuple[int, float]]:
    """Every pass until one has less than a full batch: (tasks pruned, seconds) each."""
    from agent_team.coordinator.sweeper import CHECKPOINT_BATCH

    clock.now = datetime.now(UTC) + retention + timedelta(seconds=1)
    passes: list[tuple[int, float]] = []
    while True:
        began = time.perf_counter()
        pruned = coordinator.prune_checkpoints()
        passes.append((pruned, time.perf_counter() - began))
        if pruned < CHECKPOINT_BATCH:
            return passes


def run(backend: str, n: int, tmp: Path, url: str | None) -> dict[str, Any]:
    """Two cycles of N tasks: done, measured, pruned, measured.

    The second cycle shows the long run: new checkpoints reuse the room the
    first prune freed, so its growth is what each finished task really keeps.
    """
    from agent_team.config import load_settings
    from agent_team.service.wiring import build_coordinator

    db_file = tmp / "agent-team.db"
    overrides: dict[str, Any] = {"database_url": url} if url else {}
    settings = load_settings(
        db_path=db_file,
        state_dir=tmp / "state",
        model="offline",
        builder="offline",
        billing_mode="api",
        workers=1,
        **overrides,
    )
    clock = _Clock()
    coordinator = build_coordinator(settings, clock=clock)
    measured: dict[str, Any] = {}
    passes: list[tuple[int, float]] = []
    try:
        coordinator.ledger.checkpointer()  # LangGraph's tables exist in the empty measurement
        measured["empty"] = _measure(coordinator, backend, db_file, vacuum_url=url)
        for cycle in (1, 2):
            _finish_tasks(coordinator, n, cycle)
            measured[f"done {cycle}"] = _measure(coordinator, backend, db_file, vacuum_url=url)
            cycle_passes = _prune_all(coordinator, clock, settings.checkpoint_retention)
            if sum(count for count, _ in cycle_passes) != n:
                raise SystemExit(f"cycle {cycle} pruned {cycle_passes}, expected {n} tasks")
            passes.extend(cycle_passes)
            if url and cycle == 1:  # right after the DELETEs, before autovacuum's work
                measured["pruned 1, no VACUUM"] = _measure(coordinator, backend, db_file)
            measured[f"pruned {cycle}"] = _measure(coordinator, backend, db_file, vacuum_url=url)
    finally:
        coordinator.close()
    return {"backend": backend, "n": n, "measured": measured, "passes": passes}


def _kib(value: float) -> str:
    return f"{value / 1024:,.1f} KiB"


def _split(tables: dict[str, int], checkpoint: tuple[str, ...]) -> tuple[int, int]:
    """(bytes of our ledger tables, bytes of LangGraph's tables)."""
    theirs = sum(size for table, size in tables.items() if table in checkpoint)
    return sum(tables.values()) - theirs, theirs


def report(result: dict[str, Any]) -> None:
    backend, n, measured = result["backend"], result["n"], result["measured"]
    checkpoint = CHECKPOINT_TABLES[backend]
    empty = measured["empty"]
    print(f"\n== {backend}: 2 cycles of {n} finished tasks ==")
    print(f"empty ledger (fixed cost, left out of the per-task figures): {_kib(empty['total'])}")
    ours0, theirs0 = _split(empty["tables"], checkpoint)
    for label, taken in measured.items():
        if label == "empty":
            continue
        tasks = n * (2 if label.endswith("2") else 1)
        ours, theirs = _split(taken["tables"], checkpoint)
        extra = f", free pages {_kib(taken['free'])}" if backend == "sqlite" else ""
        print(
            f"{label:>20} ({tasks} tasks): total {_kib(taken['total'])}{extra}; per task "
            f"{(taken['total'] - empty['total']) / tasks:>7,.0f} B = ledger tables "
            f"{(ours - ours0) / tasks:>6,.0f} B + checkpoint tables "
            f"{(theirs - theirs0) / tasks:>6,.0f} B"
        )
    times = [seconds for _, seconds in result["passes"]]
    print(
        f"prune passes: {len(times)} ({', '.join(str(count) for count, _ in result['passes'])} "
        f"tasks), {sum(times) * 1e3:,.0f} ms in all, {sum(times) / (2 * n) * 1e3:.2f} ms a task"
    )
    first, second = measured["pruned 1"], measured["pruned 2"]
    done = measured["done 1"]
    print(f"what each finished task keeps after pruning, by table (bytes, over {2 * n} tasks;")
    print("  'cycle 2' is the growth from the first prune to the second: the long-run cost):")
    for table in sorted(second["tables"], key=lambda t: -second["tables"][t]):
        grown = second["tables"][table] - empty["tables"].get(table, 0)
        steady = second["tables"][table] - first["tables"].get(table, 0)
        kept = done["tables"].get(table, 0) - empty["tables"].get(table, 0)
        if grown or kept:
            print(
                f"  {table:<22} {grown / (2 * n):>7,.0f}   cycle 2 {steady / n:>7,.0f}   "
                f"(done, not pruned: {kept / n:>7,.0f})"
            )
    steady_total = (second["total"] - first["total"]) / n
    overall = (second["total"] - empty["total"]) / (2 * n)
    verdict = "meets" if max(steady_total, overall) <= GOAL_BYTES else "misses"
    print(
        f"-> {overall:,.0f} B per finished task after pruning ({steady_total:,.0f} B in cycle 2): "
        f"{verdict} the goal of <= 4 KB"
    )


@contextlib.contextmanager
def _throwaway_postgres() -> Iterator[str]:
    sys.path.insert(0, str(ROOT))
    from tests.pg_server import PgServer

    server = PgServer()
    server.start()
    try:
        url = server.create_database()
        yield url
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="finished tasks per backend")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument(
        "--database-url", help="an empty PostgreSQL database (default: a throwaway server)"
    )
    args = parser.parse_args()
    if args.n < 1:
        parser.error("--n must be at least 1")
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    for backend in backends:
        with tempfile.TemporaryDirectory(prefix=f"bench-retention-{backend}-") as tmp:
            if backend == "sqlite":
                report(run(backend, args.n, Path(tmp), None))
            elif args.database_url:
                report(run(backend, args.n, Path(tmp), args.database_url))
            else:
                with _throwaway_postgres() as url:
                    report(run(backend, args.n, Path(tmp), url))


if __name__ == "__main__":
    main()
