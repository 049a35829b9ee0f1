"""What the ledger's safety costs: compare-and-set answers vs. a bare UPDATE baseline.

Each answer runs on its own connection under BEGIN IMMEDIATE with a synchronous
commit and inserts the resume command in the same transaction. The baseline
is the cheapest correct-looking thing: an UPDATE on one shared autocommit
connection. Both run in this process on the same kind of file, so the ratio
is what matters, not the absolute numbers.

A burst of answers to different questions (one thread each, released at
once) is timed twice on fresh files: with group commit (the answers that
arrive while one commit flushes share the next) and with one commit each.

    .venv/bin/python bench/bench_ledger.py [--n 500] [--burst 50] [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

from agent_team import db
from agent_team.requests import inbox


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


def bench_burst(
    path: Path, size: int, rounds: int, *, grouped: bool, submit: bool = False
) -> tuple[list[float], int]:
    """Per-call latencies over `rounds` bursts of `size` answers to distinct questions
    (or, with `submit`, of `size` task submissions)."""
    conn = _prepare(path, 0 if submit else size * rounds)
    if not grouped:
        conn.write_together = conn.write  # type: ignore[method-assign]
    latencies: list[float] = []
    guard = threading.Lock()
    for r in range(rounds):
        barrier = threading.Barrier(size)

        def one(i: int, r: int = r, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            t0 = time.perf_counter()
            if submit:
                inbox.submit_task(conn, title=f"Task {r}.{i}", body="burst", source="bench")
            else:
                won = db.answer_question(
                    conn, question_id=f"q{r * size + i}", answer_json='"yes"', answered_via="bench"
                )
                assert won
            spent = time.perf_counter() - t0
            with guard:
                latencies.append(spent)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(size)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    groups = conn._together.groups if grouped else size * rounds
    conn.close()
    return latencies, groups


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered)) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500, help="answers per variant")
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--burst", type=int, default=50, help="answers per burst")
    parser.add_argument("--rounds", type=int, default=20, help="bursts per variant")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base_conn = _prepare(Path(tmp) / "baseline.db", args.n)
        cas_conn = _prepare(Path(tmp) / "cas.db", args.n)
        baseline = bench_baseline(base_conn, args.n)
        cas = bench_cas(cas_conn, args.n)
        contended, winners = bench_contended(cas_conn, args.threads)
        single, commits = bench_burst(
            Path(tmp) / "single.db", args.burst, args.rounds, grouped=False
        )
        grouped, groups = bench_burst(
            Path(tmp) / "grouped.db", args.burst, args.rounds, grouped=True
        )
        submits = {
            grouped_: bench_burst(
                Path(tmp) / f"submits-{grouped_}.db",
                args.burst,
                args.rounds,
                grouped=grouped_,
                submit=True,
            )
            for grouped_ in (False, True)
        }
    print(f"answers per variant: {args.n}")
    print(f"baseline shared-connection UPDATE: {baseline / args.n * 1e6:8.1f} us/answer")
    print(f"compare-and-set + resume command:  {cas / args.n * 1e6:8.1f} us/answer")
    print(f"ratio cas/baseline: {cas / baseline:.2f}x")
    print(
        f"{args.threads} threads racing one question: {contended * 1e3:.1f} ms, "
        f"winners={winners} (must be 1)"
    )
    total = args.burst * args.rounds
    print(f"bursts of {args.burst} answers to different questions, {args.rounds} rounds:")
    for label, values, made in (
        ("one commit per answer", single, commits),
        ("group commit         ", grouped, groups),
    ):
        print(
            f"  {label}: p50 {_pct(values, 50) * 1e3:6.2f} ms  p99 {_pct(values, 99) * 1e3:6.2f} ms"
            f"  commits {made} for {total} answers"
        )
    print(
        f"  ratio grouped/single: p50 {_pct(grouped, 50) / _pct(single, 50):.2f}x, "
        f"p99 {_pct(grouped, 99) / _pct(single, 99):.2f}x"
    )
    print(f"bursts of {args.burst} task submissions (task + audit row + start command):")
    for grouped_, label in ((False, "one commit per submit"), (True, "group commit         ")):
        values, made = submits[grouped_]
        print(
            f"  {label}: p50 {_pct(values, 50) * 1e3:6.2f} ms  p99 {_pct(values, 99) * 1e3:6.2f} ms"
            f"  commits {made} for {total} submits"
        )


if __name__ == "__main__":
    main()
