"""What the ledger's safety costs: compare-and-set answers vs. a bare UPDATE baseline.

Each answer runs on its own connection under BEGIN IMMEDIATE with a synchronous
commit and inserts the resume command in the same transaction. The baseline
is the cheapest correct-looking thing: an UPDATE on one shared autocommit
connection. Both run in this process on the same kind of file, so the ratio
is what matters, not the absolute numbers.

    .venv/bin/python bench/bench_ledger.py [--n 500]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

from agent_team import db


def _prepare(path: Path, n: int) -> db.Ledger:
    db.init_db(path)
    conn = db.open_ledger(path)
    for i in range(n):
        db.ensure_question(
            conn,
            question_id=f"q{i}",
            thread_id=f"t{i}",
            turn=1,
            kind="clarify",
            transport="local",
            deadline_at=None,
            payload_json="{}",
        )
    return conn


def bench_baseline(conn: db.Ledger, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        conn.execute(
            "UPDATE pending_questions SET status = 'answered', answer_json = ? "
            "WHERE question_id = ? AND status = 'open'",
            ('"yes"', f"q{i}"),
        )
    return time.perf_counter() - start


def bench_cas(conn: db.Ledger, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        db.answer_question(conn, question_id=f"q{i}", answer_json='"yes"', answered_via="bench")
    return time.perf_counter() - start


def bench_contended(conn: db.Ledger, threads: int) -> tuple[float, int]:
    barrier = threading.Barrier(threads)
    wins: list[bool] = []

    def one(i: int) -> None:
        barrier.wait()
        wins.append(
            db.answer_question(
                conn, question_id="hot", answer_json=json.dumps(i), answered_via=str(i)
            )
        )

    db.ensure_question(
        conn,
        question_id="hot",
        thread_id="hot",
        turn=1,
        kind="clarify",
        transport="local",
        deadline_at=None,
        payload_json="{}",
    )
    workers = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - start, wins.count(True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500, help="answers per variant")
    parser.add_argument("--threads", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base_conn = _prepare(Path(tmp) / "baseline.db", args.n)
        cas_conn = _prepare(Path(tmp) / "cas.db", args.n)
        baseline = bench_baseline(base_conn, args.n)
        cas = bench_cas(cas_conn, args.n)
        contended, winners = bench_contended(cas_conn, args.threads)
    print(f"answers per variant: {args.n}")
    print(f"baseline shared-connection UPDATE: {baseline / args.n * 1e6:8.1f} us/answer")
    print(f"compare-and-set + resume command:  {cas / args.n * 1e6:8.1f} us/answer")
    print(f"ratio cas/baseline: {cas / baseline:.2f}x")
    print(
        f"{args.threads} threads racing one question: {contended * 1e3:.1f} ms, "
        f"winners={winners} (must be 1)"
    )


if __name__ == "__main__":
    main()
