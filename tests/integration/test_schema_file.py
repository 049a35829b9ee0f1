"""`schema.sql`, the `agent-team schema` command, and the CHECK lists against the enums."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import sys
from enum import StrEnum
from pathlib import Path

import pytest

from agent_team import db
from agent_team.exceptions import LedgerIntegrityError
from agent_team.task_model import (
    AutomationRunStatus,
    AutomationStatus,
    BillingMode,
    CommandKind,
    CommandState,
    EffectState,
    ModelFailureOutcome,
    OverlapPolicy,
    PullRequestState,
    QuestionKind,
    QuestionStatus,
    Role,
    ScheduleKind,
    TaskKind,
    TaskStatus,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_SQL = REPO_ROOT / "schema.sql"
STALE = (
    "schema.sql is out of date with the migrations in agent_team/db/schema_steps.py: "
    "run `make schema`"
)


def agent_team_command() -> list[str]:
    """The installed console script; else the same entry point through this interpreter."""
    beside_python = Path(sys.executable).with_name("agent-team")
    if beside_python.is_file():
        return [str(beside_python)]
    on_path = shutil.which("agent-team")
    if on_path:
        return [on_path]
    return [sys.executable, "-c", "from agent_team.cli.main import main; main()"]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*agent_team_command(), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        cwd=cwd,
        check=False,
    )


# --- schema.sql --------------------------------------------------------------------------


def test_schema_sql_is_the_migrations_dump() -> None:
    assert SCHEMA_SQL.read_text(encoding="utf-8") == db.dump_schema(), STALE


def test_schema_sql_is_what_init_db_makes_on_a_file(conn: db.Ledger) -> None:
    assert db.dump_schema(conn) == SCHEMA_SQL.read_text(encoding="utf-8"), STALE


def test_schema_sql_names_the_current_version() -> None:
    header = SCHEMA_SQL.read_text(encoding="utf-8").splitlines()[:2]
    assert header[1] == f"-- schema_version {db.SCHEMA_VERSION}", STALE


def test_cli_schema_prints_schema_sql(tmp_path: Path) -> None:
    proc = run_cli("schema", cwd=tmp_path)

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == SCHEMA_SQL.read_text(encoding="utf-8"), STALE


def test_cli_schema_write_regenerates_schema_sql(tmp_path: Path) -> None:
    target = tmp_path / "schema.sql"

    proc = run_cli("schema", "--write", str(target), cwd=tmp_path)

    assert proc.returncode == 0, proc.stderr
    assert target.read_bytes() == SCHEMA_SQL.read_bytes(), STALE


# --- CHECK lists match the enums of task_model -------------------------------------------

ENUM_CHECKS: dict[tuple[str, str], type[StrEnum]] = {
    ("pending_questions", "kind"): QuestionKind,
    ("pending_questions", "status"): QuestionStatus,
    ("tasks", "kind"): TaskKind,
    ("tasks", "status"): TaskStatus,
    ("commands", "kind"): CommandKind,
    ("commands", "state"): CommandState,
    ("side_effects", "state"): EffectState,
    ("budget_ledger", "billing_mode"): BillingMode,
    ("automations", "kind"): TaskKind,
    ("automations", "schedule_kind"): ScheduleKind,
    ("automations", "overlap"): OverlapPolicy,
    ("automations", "status"): AutomationStatus,
    ("automation_runs", "status"): AutomationRunStatus,
    ("model_failures", "outcome"): ModelFailureOutcome,
    ("pull_requests", "state"): PullRequestState,
    ("people", "role"): Role,
}

NOW = "2024-08-01T00:00:00.000000Z"
# A valid row of each table, minus the column under test.
BASE_ROWS: dict[str, dict[str, object]] = {
    "pending_questions": {"thread_id": "t-1", "turn": 1, "transport": "local"},
    "tasks": {"kind": "code", "source": "cli", "title": "t", "created_at": NOW, "updated_at": NOW},
    "commands": {"kind": "start", "task_id": "t-1", "created_at": NOW},
    "side_effects": {"task_id": "t-1", "kind": "slack_post", "created_at": NOW, "updated_at": NOW},
    "budget_ledger": {
        "thread_id": "t-1",
        "stage": "plan",
        "model": "m",
        "billing_mode": "api",
        "recorded_at": NOW,
        "day_bucket": "2024-08-01",
    },
    "automations": {
        "name": "n",
        "title": "t",
        "body": "b",
        "schedule_kind": "every",
        "first_run_at": NOW,
        "created_by": "cli:x",
        "created_at": NOW,
        "updated_at": NOW,
    },
    "automation_runs": {
        "automation_id": "a-1",
        "task_id": "t-1",
        "claimed_by": "x",
        "claimed_at": NOW,
    },
    "model_failures": {
        "thread_id": "t-1",
        "stage": "plan",
        "model": "m",
        "attempt": 1,
        "detail": "overloaded",
        "recorded_at": NOW,
    },
    "pull_requests": {"repo": "acme/app", "url": "u", "opened_at": NOW},
    "people": {"created_at": NOW, "updated_at": NOW},
}
PRIMARY_KEYS = {
    "pending_questions": "question_id",
    "tasks": "id",
    "commands": "command_id",
    "side_effects": "effect_id",
    "automations": "automation_id",
    "automation_runs": "run_id",
    "pull_requests": "task_id",
    "people": "name",
}
_CHECK_IN = re.compile(r"CHECK\s*\(\s*(\w+)\s+IN\s*\(([^)]*)\)\s*\)", re.IGNORECASE)


def check_lists(conn: sqlite3.Connection) -> dict[tuple[str, str], list[str]]:
    """Every `CHECK (column IN ('a', 'b'))` in the ledger's tables."""
    found: dict[tuple[str, str], list[str]] = {}
    for table, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"):
        for column, values in _CHECK_IN.findall(sql or ""):
            assert (table, column) not in found, f"two CHECK lists on {table}.{column}"
            found[(table, column)] = re.findall(r"'([^']*)'", values)
    return found


def insert(conn: sqlite3.Connection, table: str, column: str, value: str, key: str) -> int:
    row = {**BASE_ROWS[table], column: value}
    if table in PRIMARY_KEYS:
        row[PRIMARY_KEYS[table]] = key
    if table == "automations":
        row["name"] = key  # unique among automations that are not cancelled
    if table == "automation_runs":
        row["slot_at"] = key  # one run per slot
    if table == "pull_requests":
        row["number"] = len(key) + sum(map(ord, key))  # one task per PR
    names = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    cur = conn.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(row.values()))
    assert cur.lastrowid is not None
    return cur.lastrowid


def test_every_check_list_has_an_enum(conn: db.Ledger) -> None:
    assert set(check_lists(conn)) == set(ENUM_CHECKS)


@pytest.mark.parametrize(
    ("table", "column"), list(ENUM_CHECKS), ids=[f"{t}.{c}" for t, c in ENUM_CHECKS]
)
def test_check_list_equals_enum(conn: db.Ledger, table: str, column: str) -> None:
    listed = check_lists(conn)[(table, column)]

    assert sorted(listed) == sorted(member.value for member in ENUM_CHECKS[(table, column)])
    assert len(listed) == len(set(listed))


@pytest.mark.parametrize(
    ("table", "column"), list(ENUM_CHECKS), ids=[f"{t}.{c}" for t, c in ENUM_CHECKS]
)
def test_raw_insert_takes_every_enum_value_and_refuses_others(
    conn: db.Ledger, table: str, column: str
) -> None:
    members = [member.value for member in ENUM_CHECKS[(table, column)]]
    for value in members:
        rowid = insert(conn, table, column, value, key=f"{column}:{value}")
        stored = conn.execute(f"SELECT {column} FROM {table} WHERE rowid = ?", (rowid,)).fetchone()
        assert stored == (value,)
    (count,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()

    for bad in ("bogus", members[0].upper(), f"{members[0]} ", ""):
        with pytest.raises(LedgerIntegrityError, match="CHECK constraint failed"):
            insert(conn, table, column, bad, key=f"bad:{bad}")

    assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (count,)
