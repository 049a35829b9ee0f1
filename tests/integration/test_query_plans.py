"""Every query a task's hot path runs is an index lookup: `EXPLAIN QUERY PLAN`, asserted.

A per-task cost that grows with history is almost always a query without an
index: it reads every finished task's rows to find this task's. So the
queries are captured for real, not listed by hand: real tasks run through
the coordinator (offline model and builder) on a SQLite ledger whose every
connection records the SQL sent to it, as prepared (the text with its `?`,
which is what SQLite plans; `set_trace_callback` would give it with the
values spliced in, and a literal can enable a partial index the real
statement cannot use). Captured: submit, claim, leases, the graph's
checkpoints, transitions, questions, the answer, budget rows, commands,
audit rows, delivery, cancel, the sweeper's passes (recovery, deadlines,
budget unparking, automations, event and checkpoint pruning), and the
reads of a finished task's page.

Each distinct statement is then planned on the same ledger. A plan fails if
it reads a table that grows with history in full (`SCAN <table>`, with or
without a covering index), or if it looks rows up by a status whose rows are
history (`answered` questions, `done` commands, ...) through a status index:
that is a `SEARCH`, but one over every finished task. Tiny tables may be
scanned (`TINY_TABLES`). The second test drops one index at a time and
checks the first one then fails: the check can fail.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.config import load_settings
from agent_team.dashboard import DashboardContext, create_app
from agent_team.db import sqlite_ledger
from agent_team.service.wiring import build_coordinator
from tests.integration.pipeline.conftest import LONG_BODY, Clock, open_question

# Tables whose rows accumulate with every task (ours and LangGraph's); any other table
# must be in TINY_TABLES to be scanned, so a new table is checked until it is placed.
GROWING = frozenset(
    {
        "tasks",
        "task_transitions",
        "pending_questions",
        "commands",
        "budget_ledger",
        "leases",
        "checkpoints",
        "writes",
        "audit_log",
        "automation_runs",
        "side_effects",
        "seen_events",
        "ingested_issues",
        "model_failures",
    }
)
# Deliberate scans of tables with a fixed handful of rows: one row each (schema_meta,
# audit_head), one per watched repository and label (intake_cursors), a team's people
# and their keys (a revoked key stays: a few rows a rotation, at human pace), the daemons
# (a row a daemon's start, deleted a week after it stopped: the retention pass scans it).
TINY_TABLES = frozenset(
    {"schema_meta", "audit_head", "intake_cursors", "people", "api_keys", "daemons"}
)
# Status indexes, and the values whose rows are history: looking those up walks every
# finished task (live values such as `open` or `pending` select only live rows).
HISTORY_VALUES = {
    "idx_questions_status": {"answered", "expired", "superseded"},
    "idx_tasks_status": {"done", "failed", "cancelled"},
    "idx_commands_state": {"done", "failed"},
}
# Statements that hold no query to plan.
_NOT_QUERIES = re.compile(
    r"^(BEGIN|COMMIT|END|ROLLBACK|PRAGMA|SAVEPOINT|RELEASE|CREATE|DROP|ALTER|ANALYZE|VACUUM)\b",
    re.IGNORECASE,
)
# What the capture must have seen, or it silently missed the hot path.
EXPECTED = (
    "INSERT INTO tasks",
    "FROM commands c WHERE (c.state = 'pending'",  # the claim
    "INSERT INTO leases",
    "UPDATE leases SET owner = NULL",  # release
    "SELECT owner, epoch FROM leases WHERE name = ?",  # the fence
    "INSERT INTO task_transitions",
    "UPDATE task_transitions SET exited_at",
    "INSERT INTO pending_questions",
    "UPDATE pending_questions SET status = 'answered'",
    "UPDATE pending_questions SET channel_ref",  # delivery
    "INSERT INTO budget_ledger",
    "FROM budget_days WHERE day_bucket = ?",  # today's spend, one row a billing mode
    "INSERT INTO budget_days",  # ... kept with each budget row
    "UPDATE commands SET state = 'done'",
    "INSERT INTO audit_log",
    "INSERT OR REPLACE INTO checkpoints",
    "INTO writes",
    "FROM checkpoints WHERE thread_id = ?",
    "DELETE FROM writes WHERE thread_id = ?",  # the retention pass
    "DELETE FROM commands WHERE task_id = ?",
    "WHERE status = 'open' AND deadline_at IS NOT NULL",  # deadlines
    "WHERE status = 'parked' AND parked_reason = ?",  # budget unparking
    "WHERE resume_at IS NOT NULL AND resume_at <= ?",  # model pauses that are over
    "FROM automations WHERE status = 'active'",
    "DELETE FROM seen_events",
    "DELETE FROM daemons",  # ... and the daemons not seen for a week
    "SELECT DISTINCT owner FROM leases",  # the recovery sweep
    "FROM task_transitions WHERE thread_id = ? ORDER BY",  # the task page
    "FROM model_failures WHERE thread_id = ?",  # ... and its failed model calls
)


@dataclass
class Captured:
    """Distinct statements as prepared, with the values each was run with."""

    values: dict[str, set[str]] = field(default_factory=dict)

    def record(self, sql: str, params: Any) -> None:
        text = " ".join(sql.split())
        seen = self.values.setdefault(text, set())
        rows = params if isinstance(params, list) else [params]
        for row in rows[:50]:
            if isinstance(row, tuple | list):
                seen.update(str(value) for value in row)

    def queries(self) -> list[str]:
        return sorted(sql for sql in self.values if not _NOT_QUERIES.match(sql))


def _tracing(captured: Captured) -> type[sqlite_ledger._Connection]:
    """A ledger connection class that records each statement it (or a cursor of it) runs."""

    class Cursor(sqlite3.Cursor):
        def execute(self, sql: str, params: Any = (), /) -> Any:
            captured.record(sql, params)
            return super().execute(sql, params)

        def executemany(self, sql: str, seq: Any, /) -> Any:
            seq = list(seq)
            captured.record(sql, seq)
            return super().executemany(sql, seq)

    class Connection(sqlite_ledger._Connection):
        def cursor(self, factory: Any = Cursor) -> Any:
            return super().cursor(factory)

        def execute(self, sql: str, params: Any = (), /) -> sqlite3.Cursor:
            captured.record(sql, params)
            return super().execute(sql, params)

        def executemany(self, sql: str, seq: Any, /) -> sqlite3.Cursor:
            seq = list(seq)
            captured.record(sql, seq)
            return super().executemany(sql, seq)

    return Connection


def _run_the_hot_path(tmp: Path, captured: Captured) -> None:
    """Tasks through every step the daemon takes per task, and the sweeper's passes."""
    clock = Clock()
    settings = load_settings(
        db_path=tmp / "agent-team.db",
        state_dir=tmp / "state",
        model="offline",
        builder="offline",
        billing_mode="api",
    )
    coordinator = build_coordinator(settings, clock=clock)
    coordinator.ledger.checkpointer()
    captured.values.clear()  # start-up (migrations, LangGraph's setup) is not per task
    try:
        done = [coordinator.start_task(title=f"Task {n}", body=LONG_BODY) for n in range(2)]
        cancelled = coordinator.start_task(title="Cancelled", body=LONG_BODY)
        expiring = coordinator.start_task(title="Expiring", body=LONG_BODY)
        while coordinator.run_pending():
            pass
        for task_id in done:
            coordinator.answer(open_question(coordinator, task_id).question_id, "approve")
        coordinator.cancel(cancelled)
        coordinator.tick(until_idle=True, timeout_s=60)
        db.spent(coordinator.ledger, day=clock.now, billing_mode="api")  # a USD cap's check
        ctx = DashboardContext(settings=settings, coordinator=coordinator, clock=clock)
        with TestClient(create_app(ctx)) as client:
            for path in (f"/api/task/{done[0]}", f"/task/{done[0]}"):
                assert client.get(path).status_code == 200
        clock.advance(days=8)  # the question expires, the finished tasks' retention passes
        coordinator.tick(until_idle=True, timeout_s=60)
        parked = db.get_task(coordinator.ledger, expiring)
        assert parked is not None and parked.status == "parked"
        assert coordinator.prune_checkpoints() == 0  # the tick pruned all three
        coordinator.recovery_sweep()
    finally:
        coordinator.close()


@dataclass(frozen=True)
class Ledger:
    path: Path
    queries: list[str]
    values: dict[str, set[str]]


@pytest.fixture(scope="module")
def hot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledger]:
    tmp = tmp_path_factory.mktemp("query-plans")
    captured = Captured()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite_ledger, "_Connection", _tracing(captured))
        _run_the_hot_path(tmp, captured)
    yield Ledger(tmp / "agent-team.db", captured.queries(), captured.values)


def _plan(conn: sqlite3.Connection, sql: str) -> list[str]:
    placeholders = len(re.findall(r"\?", re.sub(r"'[^']*'", "", sql)))
    return [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", [None] * placeholders)]


def problems(conn: sqlite3.Connection, sql: str, values: set[str]) -> list[str]:
    """What is wrong with one statement's plan (nothing, for an index lookup)."""
    found: list[str] = []
    literals = set(re.findall(r"'([^']*)'", sql))
    for line in _plan(conn, sql):
        scan = re.match(r"SCAN (\w+)(?: AS \w+)?", line)
        if scan and scan.group(1) != "CONSTANT":
            table = _table_of(sql, scan.group(1))
            if table not in TINY_TABLES:
                found.append(f"reads all of {table}: {line}")
        for index, history in HISTORY_VALUES.items():
            if f"INDEX {index} " in f"{line} " and history & (literals | values):
                found.append(f"walks the history of {index}: {line}")
    return found


def _table_of(sql: str, name: str) -> str:
    """The table an alias in a plan line stands for (`FROM commands c` -> commands)."""
    aliased = re.search(rf"\b(\w+)\s+(?:AS\s+)?{re.escape(name)}\b", sql)
    if aliased and aliased.group(1).lower() not in {"from", "join", "into", "update", "as"}:
        return aliased.group(1)
    return name


def test_the_capture_saw_the_whole_hot_path(hot: Ledger) -> None:
    missing = [part for part in EXPECTED if not any(part in sql for sql in hot.queries)]
    assert not missing, f"the hot path no longer runs (or the capture missed): {missing}"
    assert len(hot.queries) >= 50


def test_every_hot_query_is_an_index_lookup(hot: Ledger) -> None:
    with closing(sqlite3.connect(hot.path)) as conn:
        failures = {
            sql: found
            for sql in hot.queries
            if (found := problems(conn, sql, hot.values.get(sql, set())))
        }
    assert not failures, "\n".join(f"{sql}\n    {'; '.join(why)}" for sql, why in failures.items())


@pytest.mark.parametrize(
    "index",
    [
        "idx_commands_task",
        "idx_commands_state",
        "idx_transitions_thread",
        "idx_questions_thread_status",
        "idx_budget_thread",
        "idx_tasks_status",
        "idx_tasks_unpruned",
        "idx_leases_owner",
        "idx_seen_events_at",
        "idx_automations_due",
        "idx_model_failures_thread",
    ],
)
def test_dropping_an_index_the_hot_path_uses_fails_the_check(
    hot: Ledger, index: str, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.db"
    with closing(sqlite3.connect(hot.path)) as source, closing(sqlite3.connect(copy)) as target:
        source.backup(target)
        target.execute(f"DROP INDEX {index}")
        failing = [sql for sql in hot.queries if problems(target, sql, hot.values.get(sql, set()))]
    assert failing, f"no hot query needed {index}: the check cannot see a dropped index"


def test_a_lookup_by_a_history_status_fails_the_check(hot: Ledger) -> None:
    """The recovery sweep's repair list as it was: every answered question ever, by status."""
    old = (
        "SELECT q.* FROM pending_questions AS q WHERE q.status = 'answered' AND NOT EXISTS "
        "(SELECT 1 FROM commands AS c WHERE c.command_id = 'resume:' || q.question_id) "
        "ORDER BY q.rowid"
    )
    with closing(sqlite3.connect(hot.path)) as conn:
        assert problems(conn, old, set()) == [
            "walks the history of idx_questions_status: "
            "SEARCH q USING INDEX idx_questions_status (status=?)"
        ]
        # The same lookup for a live status is fine: it reads live rows only.
        assert problems(conn, old.replace("'answered'", "'open'"), set()) == []
        assert problems(conn, "SELECT * FROM leases WHERE substr(name, 1, 5) = 'task:'", set())
