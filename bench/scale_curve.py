"""Does a task cost more when the ledger holds more history? 100, 1,000 and 10,000 tasks.

For each size N, in a child process of its own (so its RSS is its own), on a
fresh SQLite ledger with the offline pipeline (`wiring.build_coordinator`:
offline model, local transport, offline builder, as bench/pipeline.py):

1. `--template` real tasks run to done (submit -> plan gate -> approve ->
   done): the warm-up, and the rows the history is copied from.
2. History (default): N - template - timed older finished tasks are seeded
   in bulk by copying the template tasks' rows, in every table a task writes
   to, with new task ids of the same length put in every text and blob
   column (so each row keeps its size); the audit rows are appended to the
   hash chain as `append_audit` would. The bench checks that the template
   tasks left rows only in the tables it copies, so the seed is exactly what
   real finished tasks leave. Timestamps and the budget day are the
   template's: the whole history happened today, as it would at this
   throughput (so the daily token cap is lifted). With `--real` every task
   runs through the graph instead. Only the ledger is seeded, not the
   offline builder's git worktrees (bench/pipeline.py shows their cost).
3. `--timed` real tasks run one at a time: submit, `run_pending()` until the
   plan gate (start->waiting), answer, `run_pending()` until done
   (answer->done).
4. Bytes: the file after `PRAGMA wal_checkpoint(TRUNCATE)` (page_count *
   page_size) less the empty ledger's, per task; then the coordinator's clock
   moves past the retention, `prune_checkpoints()` runs until nothing is
   left, and the bytes are taken again.

Reported per size: the medians of both latencies over all timed tasks and
over their first and last tenth (and, of answer->done, the time spent in
the builder: the offline builder's git work), throughput of the timed
phase, one budget cap check (today's total that every model call reads
first: `budget_days` since schema v12, the sum of today's rows before),
RSS (VmRSS before and after the timed phase, VmHWM), bytes per task
before and after pruning; then the ratio of the largest size's figure to
the smallest's: flat is about 1.0.

    .venv/bin/python bench/scale_curve.py                         # 100, 1,000, 10,000 (~4 min)
    .venv/bin/python bench/scale_curve.py --sizes 100,1000        # quick (about 1 min)
    .venv/bin/python bench/scale_curve.py --sizes 100,1000 --real # every task through the graph
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BODY = (
    "Remember the email address on the login page between visits, for this task.\n"
    "- Store it in a cookie\n"
    "- Prefill the field\n"
    "- Test both paths\n"
)
# One task's rows in each table it writes to (`?` is the task id). The audit log is
# appended separately: its rows are hash-chained.
PER_TASK = {
    "tasks": "id = ?",
    "task_transitions": "thread_id = ?",
    "pending_questions": "thread_id = ?",
    "commands": "task_id = ?",
    "budget_ledger": "thread_id = ?",
    "leases": "name = 'task:' || ?",
    "side_effects": "task_id = ?",
    "checkpoints": "thread_id = ?",
    "writes": "thread_id = ?",
}
AUDIT = "audit_log"
# Tables a task changes in place without adding rows.
IN_PLACE = {"audit_head", "sqlite_sequence", "schema_meta", "budget_days"}
# Identity columns the copies get anew.
AUTO_IDS = {"task_transitions": "transition_id", "budget_ledger": "entry_id", AUDIT: "seq"}


class _BuildTimer:
    """Wraps the graph's builder (the offline builder's git work) to time it per task."""

    def __init__(self, coordinator: Any) -> None:
        self._build = coordinator.deps.build
        self.seconds = 0.0
        coordinator.deps.build = self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return self._build(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - began

    def take(self) -> float:
        taken, self.seconds = self.seconds, 0.0
        return taken


class _Clock:
    """The coordinator's clock, moved past the retention by hand."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _file_bytes(path: Path) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()
    return {"bytes": pages * page_size, "free": free * page_size}


def _row_counts(conn: sqlite3.Connection) -> dict[str, int]:
    tables = [
        name
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if not name.startswith("sqlite_stat")
    ]
    return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in tables}


def _run_one(coordinator: Any, title: str) -> tuple[float, float]:
    """One task: (submit -> waiting at the plan gate, answer -> done) in seconds."""
    from agent_team import db

    ledger = coordinator.ledger
    began = time.perf_counter()
    task_id = coordinator.start_task(title=title, body=BODY, source="bench")
    while coordinator.run_pending():
        pass
    waiting = time.perf_counter()
    (question,) = db.list_questions(ledger, status="open", thread_id=task_id)
    answered = time.perf_counter()
    coordinator.answer(question.question_id, "approve", via="bench")
    while coordinator.run_pending():
        pass
    finished = time.perf_counter()
    task = db.get_task(ledger, task_id)
    if task is None or task.status != "done":
        raise SystemExit(f"task {task_id} is {task.status if task else 'missing'}, not done")
    return waiting - began, finished - answered


def _swap(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, bytes):
        return value.replace(old.encode(), new.encode())
    return value


def _copies(
    conn: sqlite3.Connection, table: str, templates: list[str], count: int
) -> Iterator[tuple[Any, ...]]:
    """`count` copies of the template tasks' rows, each under a new task id of the same length."""
    skip = AUTO_IDS.get(table)
    columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})") if row[1] != skip]
    rows = {
        template: conn.execute(
            f"SELECT {', '.join(columns)} FROM {table} WHERE {PER_TASK[table]} ORDER BY rowid",
            (template,),
        ).fetchall()
        for template in templates
    }
    for k in range(count):
        template = templates[k % len(templates)]
        new = f"s{k:0{len(template) - 1}x}"[-len(template) :]
        for row in rows[template]:
            yield tuple(_swap(value, template, new) for value in row)


def _seed(path: Path, templates: list[str], count: int) -> dict[str, Any]:
    """Copy the template tasks `count` times into the ledger, in one transaction."""
    from agent_team.db.audit import GENESIS_HASH, row_hash

    began = time.perf_counter()
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        rows = 0
        for table in PER_TASK:
            skip = AUTO_IDS.get(table)
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] != skip]
            marks = ", ".join("?" for _ in columns)
            cur = conn.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                _copies(conn, table, templates, count),
            )
            rows += cur.rowcount
        # The audit rows, chained on from the head as `append_audit` does.
        head = conn.execute("SELECT rows, hash FROM audit_head WHERE id = 1").fetchone()
        total, prev = (int(head[0]), str(head[1])) if head else (0, GENESIS_HASH)
        audit = {
            template: conn.execute(
                "SELECT at, actor, via, action, target, detail FROM audit_log "
                "WHERE target = ? OR target LIKE ? ORDER BY seq",
                (template, template + ":%"),
            ).fetchall()
            for template in templates
        }
        for k in range(count):
            template = templates[k % len(templates)]
            new = f"s{k:0{len(template) - 1}x}"[-len(template) :]
            for at, actor, via, action, target, detail in audit[template]:
                target, detail = _swap(target, template, new), _swap(detail, template, new)
                digest = row_hash(prev, at, actor, via, action, target, detail)
                conn.execute(
                    "INSERT INTO audit_log (at, actor, via, action, target, detail, prev_hash, "
                    "hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (at, actor, via, action, target, detail, prev, digest),
                )
                prev, total, rows = digest, total + 1, rows + 1
        if head is not None:
            conn.execute("UPDATE audit_head SET rows = ?, hash = ? WHERE id = 1", (total, prev))
        # The days' totals the cap check reads, as `db.record_usage` keeps them.
        conn.execute("DELETE FROM budget_days")
        conn.execute(
            "INSERT INTO budget_days (day_bucket, billing_mode, calls, input_tokens, "
            "output_tokens, usd_cost) SELECT day_bucket, billing_mode, COUNT(*), "
            "SUM(input_tokens), SUM(output_tokens), SUM(usd_cost) FROM budget_ledger "
            "GROUP BY day_bucket, billing_mode"
        )
        conn.execute("COMMIT")
    return {"rows": rows, "seconds": time.perf_counter() - began}


def _check_template_rows(
    path: Path, before: dict[str, int], templates: list[str]
) -> dict[str, float]:
    """Every row the template tasks added is in a table the seed copies, and is found by it."""
    with closing(sqlite3.connect(path)) as conn:
        after = _row_counts(conn)
        per_task: dict[str, float] = {}
        for table, count in after.items():
            grown = count - before.get(table, 0)
            if not grown or table in IN_PLACE:
                continue
            if table == AUDIT:
                found = sum(
                    conn.execute(
                        "SELECT count(*) FROM audit_log WHERE target = ? OR target LIKE ?",
                        (t, t + ":%"),
                    ).fetchone()[0]
                    for t in templates
                )
            elif table in PER_TASK:
                found = sum(
                    conn.execute(
                        f"SELECT count(*) FROM {table} WHERE {PER_TASK[table]}", (t,)
                    ).fetchone()[0]
                    for t in templates
                )
            else:
                raise SystemExit(
                    f"the template tasks wrote to {table}, which the seed does not copy"
                )
            if found != grown:
                raise SystemExit(
                    f"{table}: the template tasks added {grown} rows, the seed sees {found}"
                )
            per_task[table] = grown / len(templates)
    return per_task


def _summary(values: list[float]) -> dict[str, float]:
    tenth = max(1, len(values) // 10)
    return {
        "median": statistics.median(values),
        "first_tenth": statistics.median(values[:tenth]),
        "last_tenth": statistics.median(values[-tenth:]),
    }


def run_size(size: int, template: int, timed: int, real: bool, tmp: Path) -> dict[str, Any]:
    from agent_team import db
    from agent_team.config import load_settings
    from agent_team.coordinator.sweeper import CHECKPOINT_BATCH
    from agent_team.service.wiring import build_coordinator

    if real:
        template, timed = 1, size - 1
    seeded = size - template - timed
    if seeded < 0:
        raise SystemExit(f"size {size} is smaller than --template + --timed")
    path = tmp / "agent-team.db"
    settings = load_settings(
        db_path=path,
        state_dir=tmp / "state",
        model="offline",
        builder="offline",
        billing_mode="api",
        workers=1,
        # The whole history is today's: with the default cap the day runs out of tokens
        # and the timed tasks park on the budget instead of being timed.
        daily_token_cap=10**12,
    )
    clock = _Clock()
    coordinator = build_coordinator(settings, clock=clock)
    try:
        coordinator.ledger.checkpointer()  # LangGraph's tables are in the empty figure
        empty = _file_bytes(path)["bytes"]
        with closing(sqlite3.connect(path)) as conn:
            before = _row_counts(conn)
        for i in range(template):
            _run_one(coordinator, f"Template {i}")
        templates = [t.id for t in db.list_tasks(coordinator.ledger, limit=template)]
        rows_per_task = _check_template_rows(path, before, templates)
        seed = _seed(path, templates, seeded) if seeded else {"rows": 0, "seconds": 0.0}

        rss_before = _status_kib("VmRSS")
        start: list[float] = []
        answer: list[float] = []
        build: list[float] = []
        timer = _BuildTimer(coordinator)
        began = time.perf_counter()
        for i in range(timed):
            to_gate, to_done = _run_one(coordinator, f"Task {i}")
            start.append(to_gate)
            answer.append(to_done)
            build.append(timer.take())
        elapsed = time.perf_counter() - began
        rss_after = _status_kib("VmRSS")
        # The cap check before every model call reads today's total.
        checks: list[float] = []
        for _ in range(50):
            checked = time.perf_counter()
            db.tokens_spent(coordinator.ledger, day=clock.now, billing_mode="api")
            checks.append(time.perf_counter() - checked)
        total = db.count_tasks_by_status(coordinator.ledger)["done"]
        if total != size:
            raise SystemExit(f"the ledger holds {total} finished tasks, not {size}")

        kept = _file_bytes(path)
        clock.now = datetime.now(UTC) + settings.checkpoint_retention + timedelta(seconds=1)
        prune_began = time.perf_counter()
        pruned = 0
        while (count := coordinator.prune_checkpoints()) >= CHECKPOINT_BATCH:
            pruned += count
        pruned += count
        while db.reclaim_space(coordinator.ledger):  # a pass gives back at most 10,000 pages
            pass
        prune_s = time.perf_counter() - prune_began
        after = _file_bytes(path)
    finally:
        coordinator.close()
    return {
        "size": size,
        "template": template,
        "seeded": seeded,
        "timed": timed,
        "seed": seed,
        "rows_per_task": rows_per_task,
        "start": _summary(start),
        "answer": _summary(answer),
        "build": _summary(build),
        "throughput": timed / elapsed,
        "budget_check_s": statistics.median(checks),
        "rss_before_kib": rss_before,
        "rss_after_kib": rss_after,
        "rss_peak_kib": _status_kib("VmHWM"),
        "bytes_per_task_kept": (kept["bytes"] - empty) / size,
        "bytes_per_task_pruned": (after["bytes"] - empty) / size,
        "free_after_prune": after["free"],
        "pruned": pruned,
        "prune_s": prune_s,
    }


def _child(args: argparse.Namespace, size: int) -> dict[str, Any]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--size",
        str(size),
        "--template",
        str(args.template),
        "--timed",
        str(args.timed),
        *(["--real"] if args.real else []),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"size {size} failed (exit {done.returncode}); see above")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def report(results: list[dict[str, Any]], real: bool) -> None:
    how = "every task through the graph" if real else "history seeded from real tasks' rows"
    print(f"scale curve, SQLite, offline pipeline ({how}):\n")
    print(f"{'':46}" + "".join(f"{r['size']:>14,}" for r in results) + f"{'last/first':>12}")
    rows: list[tuple[str, list[float], str]] = []
    for key, label in (
        ("start", "start->waiting"),
        ("answer", "answer->done"),
        ("build", "  of it in the builder (git)"),
    ):
        for stat, name in (
            ("median", "median"),
            ("first_tenth", "first tenth"),
            ("last_tenth", "last tenth"),
        ):
            rows.append((f"{label} {name} (ms)", [r[key][stat] * 1e3 for r in results], "{:14.2f}"))
    rows.append(("throughput (tasks/s)", [r["throughput"] for r in results], "{:14.1f}"))
    rows.append(
        (
            "today's budget total, one cap check (ms)",
            [r["budget_check_s"] * 1e3 for r in results],
            "{:14.3f}",
        )
    )
    rows.append(
        ("RSS before timed tasks (MiB)", [r["rss_before_kib"] / 1024 for r in results], "{:14.1f}")
    )
    rows.append(
        ("RSS after timed tasks (MiB)", [r["rss_after_kib"] / 1024 for r in results], "{:14.1f}")
    )
    rows.append(("peak RSS (MiB)", [r["rss_peak_kib"] / 1024 for r in results], "{:14.1f}"))
    rows.append(
        ("ledger bytes/task, kept", [r["bytes_per_task_kept"] for r in results], "{:14,.0f}")
    )
    rows.append(
        (
            "ledger bytes/task, after pruning",
            [r["bytes_per_task_pruned"] for r in results],
            "{:14,.0f}",
        )
    )
    rows.append(
        ("prune, ms per task", [r["prune_s"] / r["size"] * 1e3 for r in results], "{:14.2f}")
    )
    for label, values, fmt in rows:
        ratio = values[-1] / values[0] if values[0] else float("nan")
        print(f"{label:46}" + "".join(fmt.format(v) for v in values) + f"{ratio:11.2f}x")
    print()
    for r in results:
        print(
            f"size {r['size']:,}: {r['template']} template + {r['seeded']:,} seeded "
            f"({r['seed']['rows']:,} rows in {r['seed']['seconds']:.1f} s) + {r['timed']} timed; "
            f"pruned {r['pruned']:,}; free pages left {r['free_after_prune']:,} B"
        )
    print(
        "rows a finished task leaves: "
        + ", ".join(f"{t} {n:g}" for t, n in sorted(results[0]["rows_per_task"].items()))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="finished tasks per run")
    parser.add_argument("--template", type=int, default=20, help="real tasks the seed copies")
    parser.add_argument("--timed", type=int, default=80, help="real tasks timed on top")
    parser.add_argument("--real", action="store_true", help="run every task through the graph")
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.size:
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
            result = run_size(args.size, args.template, args.timed, args.real, Path(tmp))
        print(json.dumps(result))
        return
    sizes = [int(size) for size in args.sizes.split(",")]
    report([_child(args, size) for size in sizes], args.real)


if __name__ == "__main__":
    main()
