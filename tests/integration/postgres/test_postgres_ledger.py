"""What the PostgreSQL ledger adds beyond the contract suite: processes, retries, placeholders."""

from __future__ import annotations

import json
import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from agent_team import db
from agent_team.db.postgres_ledger import WRITE_ATTEMPTS, PostgresLedger, translate
from agent_team.exceptions import LedgerBusyError
from tests.integration.ledger.helpers import ask
from tests.integration.ledger.test_races import PROCESSES, _answer_in_process


@pytest.fixture
def ledger(pg_url: str) -> PostgresLedger:
    db.init_db(pg_url)
    with PostgresLedger(pg_url) as opened:
        yield opened


def test_question_marks_become_psycopg_placeholders_outside_quoted_text() -> None:
    assert translate("SELECT ? || '?' , \"a?\" WHERE x LIKE '5%' AND y = ?") == (
        "SELECT %s || '?' , \"a?\" WHERE x LIKE '5%%' AND y = %s"
    )
    assert translate("SELECT 10 % 3") == "SELECT 10 %% 3"


def test_four_processes_race_one_question_on_postgres(ledger: PostgresLedger, pg_url: str) -> None:
    ask(ledger, "q1")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_answer_in_process, args=(pg_url, n, start, results))
        for n in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    outcomes = dict(results.get(timeout=60) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    winners = [worker for worker, won in outcomes.items() if won]
    assert len(winners) == 1
    question = db.get_question(ledger, "q1")
    assert question is not None and question.answer == {"proc": winners[0]}
    assert [c.command_id for c in db.list_commands(ledger)] == ["resume:q1"]


def test_read_modify_writes_on_one_row_are_retried_until_each_counts_once(
    ledger: PostgresLedger,
) -> None:
    """Every poll reads the cursor row and updates it: serialisation failures are re-run."""
    threads, polls_each = 8, 5
    barrier = threading.Barrier(threads)

    def poll(_: int) -> None:
        barrier.wait()
        for _ in range(polls_each):
            db.record_poll(ledger, source="github", label="agent-team", status=200, tasks_created=1)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(poll, range(threads)))

    cursor = db.get_cursor(ledger, source="github", label="agent-team")
    assert cursor is not None
    assert (cursor.polls, cursor.tasks_created) == (threads * polls_each, threads * polls_each)


def test_a_claim_never_hands_one_task_to_two_consumers(ledger: PostgresLedger) -> None:
    """Two commands of one task, claimed at once by two consumers: one of them gets the task."""
    for round_ in range(10):
        task = f"t{round_}"
        db.enqueue_command(ledger, command_id=f"{task}:a", kind="start", task_id=task)
        db.enqueue_command(ledger, command_id=f"{task}:b", kind="resume", task_id=task)
        barrier = threading.Barrier(2)

        def claim(consumer: str, barrier: threading.Barrier = barrier) -> list[db.Command]:
            barrier.wait()
            return db.claim_commands(ledger, consumer=consumer, limit=1, lease_s=60)

        with ThreadPoolExecutor(max_workers=2) as pool:
            got = [c for claimed in pool.map(claim, ["w1", "w2"]) for c in claimed]
        owners = {c.claimed_by for c in db.list_commands(ledger, task_id=task, state="claimed")}
        assert len(owners) == 1, f"round {round_}: {got}"
        for command in got:
            db.complete_command(ledger, command_id=command.command_id)
        for command in db.list_commands(ledger, task_id=task, state="claimed"):
            db.complete_command(ledger, command_id=command.command_id)


def test_a_write_that_never_serialises_ends_busy_and_stores_nothing(
    ledger: PostgresLedger,
) -> None:
    import psycopg

    calls = []

    def always_conflicts(tx: db.Transaction) -> None:
        calls.append(1)
        tx.execute("INSERT INTO seen_events (source, event_id, seen_at) VALUES ('s', 'e', 'x')")
        raise psycopg.errors.SerializationFailure("could not serialize access")

    with pytest.raises(LedgerBusyError, match="could not serialise"):
        ledger.write(always_conflicts)
    assert len(calls) == WRITE_ATTEMPTS
    assert not db.event_seen(ledger, source="s", event_id="e")


def test_rows_read_by_name_and_by_position_and_costs_keep_their_precision(
    ledger: PostgresLedger,
) -> None:
    db.record_usage(
        ledger,
        thread_id="t",
        stage="plan",
        model="m",
        billing_mode="api",
        input_tokens=1,
        output_tokens=2,
        usd_cost=0.123456789012,
    )
    row = ledger.fetch_one("SELECT usd_cost, input_tokens FROM budget_ledger")
    assert row is not None and row["usd_cost"] == row[0] == 0.123456789012
    assert row.keys() == ["usd_cost", "input_tokens"] and tuple(row) == (0.123456789012, 1)
    assert json.loads(json.dumps(db.table_counts(ledger)))["budget_ledger"] == 1
