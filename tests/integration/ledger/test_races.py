"""Races: every compare-and-set has exactly one winner, across threads and processes."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agent_team import db
from tests.integration.ledger.helpers import ask

THREADS = 64
PROCESSES = 4


def race(workers: int, attempt: Callable[[int], Any]) -> list[Any]:
    """Run `attempt(i)` in `workers` threads released together; re-raise any exception."""
    barrier = threading.Barrier(workers)

    def run(i: int) -> Any:
        barrier.wait()
        return attempt(i)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run, range(workers)))


def test_64_threads_sharing_one_connection_answer_once(ledger: db.Ledger) -> None:
    ask(ledger, "q1", thread_id="task-1")
    results = race(
        THREADS,
        lambda i: db.answer_question(
            ledger, question_id="q1", answer_json=json.dumps({"by": i}), answered_via=f"user{i}"
        ),
    )
    assert results.count(True) == 1
    assert results.count(False) == THREADS - 1
    winner = results.index(True)
    question = db.get_question(ledger, "q1")
    assert question is not None
    assert question.answer == {"by": winner} and question.answered_via == f"user{winner}"
    commands = db.list_commands(ledger)
    assert [c.command_id for c in commands] == ["resume:q1"]
    assert commands[0].payload["answer"] == {"by": winner}


def test_answer_racing_expiry_has_one_consistent_winner(ledger: db.Ledger) -> None:
    for n in range(20):
        ask(ledger, f"q{n}", turn=n + 1)
    for n in range(20):
        qid = f"q{n}"
        outcome = race(
            8,
            lambda i, qid=qid: (
                (
                    "answer",
                    db.answer_question(ledger, question_id=qid, answer_json="1", answered_via="x"),
                )
                if i % 2
                else ("expire", db.expire_question(ledger, question_id=qid))
            ),
        )
        winners = [kind for kind, won in outcome if won]
        assert len(winners) == 1, outcome
        question = db.get_question(ledger, qid)
        assert question is not None
        assert question.status == ("answered" if winners[0] == "answer" else "expired")
        has_resume = db.get_command(ledger, db.resume_command_id(qid)) is not None
        assert has_resume is (winners[0] == "answer")


def test_one_delivery_wins_a_race(ledger: db.Ledger) -> None:
    ask(ledger)
    results = race(16, lambda i: db.record_delivery(ledger, question_id="q1", channel_ref=f"C:{i}"))
    assert results.count(True) == 1
    question = db.get_question(ledger, "q1")
    assert question is not None and question.channel_ref == f"C:{results.index(True)}"


def test_claims_never_hand_a_command_to_two_consumers(ledger: db.Ledger) -> None:
    for n in range(40):
        db.enqueue_command(
            ledger, command_id=f"c{n:02}", kind="resume", task_id=f"t{n}", payload={}
        )
    batches = race(8, lambda i: db.claim_commands(ledger, consumer=f"w{i}", limit=10, lease_s=60))
    claimed = Counter(c.command_id for batch in batches for c in batch)
    assert sorted(claimed) == [f"c{n:02}" for n in range(40)]
    assert set(claimed.values()) == {1}


def test_racing_consumers_never_split_one_tasks_commands(ledger: db.Ledger) -> None:
    for n in range(40):
        db.enqueue_command(
            ledger, command_id=f"c{n:02}", kind="resume", task_id=f"t{n % 4}", payload={}
        )
    batches = race(8, lambda i: db.claim_commands(ledger, consumer=f"w{i}", limit=40, lease_s=60))
    holders: dict[str, set[str]] = {}
    for batch in batches:
        for command in batch:
            holders.setdefault(command.task_id, set()).add(command.claimed_by or "")
    assert all(len(consumers) == 1 for consumers in holders.values()), holders


def test_concurrent_transitions_keep_one_open_row(ledger: db.Ledger) -> None:
    phases = ["clarify", "plan", "plan_review", "build"]
    race(
        16,
        lambda i: db.record_transition(
            ledger, thread_id="t", to_phase=phases[i % 4], status="running"
        ),
    )
    rows = db.list_transitions(ledger, "t")
    assert sum(r.exited_at is None for r in rows) == 1
    # Each row continues from the one before it.
    assert all(b.from_phase == a.to_phase for a, b in itertools.pairwise(rows))


def _answer_in_process(path: str, worker: int, start: Any, results: Any) -> None:
    conn = db.open_ledger(path)
    start.wait()
    won = db.answer_question(
        conn, question_id="q1", answer_json=json.dumps({"proc": worker}), answered_via=f"p{worker}"
    )
    results.put((worker, won))
    conn.close()


def test_four_processes_race_one_question(ledger_file: Path) -> None:
    conn = db.open_ledger(ledger_file)
    ask(conn, "q1")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_answer_in_process, args=(str(ledger_file), n, start, results))
        for n in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    outcomes = dict(results.get(timeout=60) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    assert sorted(outcomes) == list(range(PROCESSES))
    winners = [worker for worker, won in outcomes.items() if won]
    assert len(winners) == 1
    question = db.get_question(conn, "q1")
    assert question is not None and question.answer == {"proc": winners[0]}
    assert [c.command_id for c in db.list_commands(conn)] == ["resume:q1"]
    conn.close()
