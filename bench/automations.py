"""Automations: the claim gate under contention, and `/api/triage` on a big ledger.

1. Claim gate. N automations are due at once; 8 threads race to make their
   runs through `AutomationRunner.claim_due` (the conditional UPDATE of
   `next_run_at` and the run row in one write transaction, with the overlap
   check), each thread walking the due list from its own offset. Beside it,
   in the same run, the baseline: the same 8 threads racing a bare conditional
   `UPDATE ... WHERE next_run_at = ?` on a plain SQLite table, one autocommit
   statement per claim. Both count claims won per second (exactly N must be
   won in each).
2. The inbox. A ledger with `--tasks` tasks (most finished; some waiting on a
   question, parked or recently failed) and `--automations` automations with 5
   runs each; `GET /api/triage` through the real app, `--requests` times,
   p50/p99, beside `GET /healthz` on the same app in the same run.

    .venv/bin/python bench/automations.py      # 400 claims; 10,000 tasks, 1,000 automations
    .venv/bin/python bench/automations.py --claims 100 --tasks 2000 --automations 200   # quick

A benchmark, not a test: only the ratios within one run mean anything.
"""

from __future__ import annotations

import argparse
import math
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from starlette.testclient import TestClient  # noqa: E402

from agent_team import db  # noqa: E402
from agent_team.automations.runner import AutomationRunner  # noqa: E402
from agent_team.config import load_settings  # noqa: E402
from agent_team.dashboard import DashboardContext, create_app  # noqa: E402
from agent_team.models.budget_view import BudgetToday  # noqa: E402

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
THREADS = 8


def iso(moment: datetime) -> str:
    return db.to_iso(moment)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, min(len(ordered), math.ceil(q / 100 * len(ordered)))) - 1]


def race(work: Callable[[int], int]) -> tuple[float, int]:
    """Run `work(thread)` on THREADS threads released together; (seconds, total returned)."""
    barrier = threading.Barrier(THREADS + 1)
    results = [0] * THREADS

    def run(n: int) -> None:
        barrier.wait()
        results[n] = work(n)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, sum(results)


def claim_gate(folder: Path, n: int) -> tuple[float, int]:
    path = folder / "claims.db"
    db.init_db(path)
    with db.open_ledger(path) as ledger:
        for i in range(n):
            db.create_automation(
                ledger,
                values={
                    "automation_id": f"a{i}",
                    "name": f"auto-{i}",
                    "title": "T",
                    "body": "B",
                    "schedule_kind": "every",
                    "every_s": 3600,
                    "first_run_at": iso(NOW - timedelta(hours=1)),
                    "next_run_at": iso(NOW - timedelta(minutes=1)),
                    "created_by": "bench",
                },
            )
        due = db.due_automations(ledger, NOW, limit=n)

        def work(thread: int) -> int:
            runner = AutomationRunner(
                ledger,
                submit=lambda **_: "",
                budget=lambda: BudgetToday("d", "api", "usd", 0.0, 1.0),
                clock=lambda: NOW,
                owner=f"t{thread}",
            )
            won = 0
            for k in range(n):
                automation = due[(k + thread * n // THREADS) % n]
                if runner.claim_due(automation, NOW) is not None:
                    won += 1
            return won

        return race(work)


def bare_updates(folder: Path, n: int) -> tuple[float, int]:
    path = folder / "bare.db"
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE automations (automation_id TEXT PRIMARY KEY, next_run_at TEXT)")
    slot = iso(NOW - timedelta(minutes=1))
    setup.executemany("INSERT INTO automations VALUES (?, ?)", [(f"a{i}", slot) for i in range(n)])
    setup.commit()
    setup.close()
    following = iso(NOW + timedelta(minutes=59))

    def work(thread: int) -> int:
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        won = 0
        for k in range(n):
            i = (k + thread * n // THREADS) % n
            cur = conn.execute(
                "UPDATE automations SET next_run_at = ? WHERE automation_id = ? "
                "AND next_run_at = ?",
                (following, f"a{i}", slot),
            )
            won += cur.rowcount
        conn.close()
        return won

    return race(work)


def seed_big(path: Path, tasks: int, automations: int) -> None:
    """A big ledger, written with plain SQL in one transaction (the bench's own shortcut)."""
    db.init_db(path)
    pick = random.Random(5)
    conn = sqlite3.connect(path)
    rows, questions = [], []
    for i in range(tasks):
        roll = pick.random()
        status = (
            "done"
            if roll < 0.85
            else "waiting"
            if roll < 0.9
            else "parked"
            if roll < 0.93
            else "failed"
            if roll < 0.97
            else "queued"
        )
        updated = iso(NOW - timedelta(minutes=pick.randrange(60 * 24 * 30)))
        reason = (
            pick.choice(("question_expired", "builder_unavailable")) if status == "parked" else None
        )
        rows.append(
            (
                f"t{i}",
                "code",
                "cli",
                f"Task {i}",
                "body",
                status,
                "plan_review",
                reason,
                updated,
                updated,
            )
        )
        if status == "waiting":
            questions.append(
                (
                    f"t{i}:q1",
                    f"t{i}",
                    1,
                    "plan_decision",
                    "open",
                    "local",
                    updated,
                    iso(NOW + timedelta(hours=5)),
                )
            )
        if reason == "question_expired":
            questions.append(
                (f"t{i}:q1", f"t{i}", 1, "plan_decision", "expired", "local", updated, updated)
            )
    conn.executemany(
        "INSERT INTO tasks (id, kind, source, title, body, status, phase, parked_reason, "
        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.executemany(
        "INSERT INTO pending_questions (question_id, thread_id, turn, kind, status, transport, "
        "posted_at, deadline_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        questions,
    )
    autos, runs = [], []
    for i in range(automations):
        next_run = NOW + timedelta(minutes=pick.randrange(-30, 600))
        autos.append(
            (
                f"a{i}",
                f"auto-{i}",
                "T",
                "B",
                "every",
                3600,
                iso(NOW - timedelta(days=5)),
                iso(next_run),
                "bench",
                iso(NOW),
                iso(NOW),
            )
        )
        for r in range(5):
            status = pick.choices(("created", "skipped_budget", "failed"), (0.9, 0.05, 0.05))[0]
            slot = iso(NOW - timedelta(hours=r + 1))
            runs.append(
                (
                    f"a{i}@{r}",
                    f"a{i}",
                    slot,
                    status,
                    f"t{pick.randrange(tasks)}",
                    "bench",
                    slot,
                    slot,
                )
            )
    conn.executemany(
        "INSERT INTO automations (automation_id, name, title, body, schedule_kind, every_s, "
        "first_run_at, next_run_at, created_by, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        autos,
    )
    conn.executemany(
        "INSERT INTO automation_runs (run_id, automation_id, slot_at, status, task_id, "
        "claimed_by, claimed_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        runs,
    )
    conn.commit()
    conn.execute("ANALYZE")
    conn.close()


def latencies(client: TestClient, path: str, requests: int) -> list[float]:
    found = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(path)
        found.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text
    return found


def inbox(folder: Path, tasks: int, automations: int, requests: int) -> dict[str, list[float]]:
    path = folder / "big.db"
    seed_big(path, tasks, automations)
    settings = load_settings(db_path=path)
    with db.open_ledger(path) as ledger:

        class Holder:  # the daemon's coordinator, as far as the app reads it
            def __init__(self) -> None:
                self.ledger = ledger
                self.wake = threading.Event()

        ctx = DashboardContext(settings, coordinator=Holder(), clock=lambda: NOW)  # type: ignore[arg-type]
        with TestClient(create_app(ctx)) as client:
            items = len(client.get("/api/triage").json()["items"])
            print(f"the inbox holds {items} item(s)", file=sys.stderr)
            latencies(client, "/api/triage", 5)  # warm up
            return {
                "/api/triage": latencies(client, "/api/triage", requests),
                "/healthz": latencies(client, "/healthz", requests),
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=400)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--automations", type=int, default=1_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-automations-") as tmp:
        folder = Path(tmp)
        gate_s, gate_won = claim_gate(folder, args.claims)
        bare_s, bare_won = bare_updates(folder, args.claims)
        assert gate_won == bare_won == args.claims, (gate_won, bare_won)
        timings = inbox(folder, args.tasks, args.automations, args.requests)
    gate_rate, bare_rate = args.claims / gate_s, args.claims / bare_s
    print(f"claim gate, {THREADS} threads racing for {args.claims} due slots (each won once):")
    print(f"  agent-team claim_due    {gate_rate:8.0f} claims/s")
    print(
        f"  bare conditional UPDATE {bare_rate:8.0f} claims/s   ratio {bare_rate / gate_rate:.1f}x"
    )
    print(
        f"inbox on {args.tasks:,} tasks and {args.automations:,} automations, "
        f"{args.requests} requests:"
    )
    for name, values in timings.items():
        print(
            f"  {name:13} p50 {statistics.median(values) * 1e3:6.1f} ms   "
            f"p99 {pct(values, 99) * 1e3:6.1f} ms"
        )


if __name__ == "__main__":
    main()
