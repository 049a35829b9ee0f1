"""Migrations on real ledger files: old versions upgrade whole, failures roll back.

The old ledgers come from hand-written SQL under `tests/fixtures/` (historical
DDL plus rows), never from the current code, so an edit to a released
version's statements in `agent_team/db/schema_steps.py` shows up here.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_team import db
from agent_team.db import schema
from agent_team.db.schema import LEDGER_TABLES, REQUIRED_COLUMNS, SCHEMA_VERSION
from agent_team.exceptions import LedgerNotReadyError, LedgerStorageError, SchemaTooNewError

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
HISTORICAL_VERSIONS = (1, 3, 4, 6)
CRASH_EXIT_CODE = 137  # what tests/fixtures/crash_mid_v5.py exits with
SUBPROCESS_TIMEOUT_S = 60

# The tables each fixture version has (besides sqlite_sequence).
TABLES_AT = {
    1: {"pending_questions", "budget_ledger", "schema_meta"},
    3: {"pending_questions", "budget_ledger", "schema_meta", "ingested_issues", "task_transitions"},
    4: {"pending_questions", "budget_ledger", "schema_meta", "ingested_issues", "task_transitions"},
    6: {
        "pending_questions",
        "budget_ledger",
        "schema_meta",
        "ingested_issues",
        "task_transitions",
        "tasks",
        "commands",
    },
}

# A value with its Python type, so 1 and 1.0 (INTEGER and REAL) do not compare equal.
Typed = tuple[str, object]
Rows = dict[str, list[dict[str, Typed]]]
Master = list[tuple[str, str, str, str | None]]


# --- helpers -----------------------------------------------------------------------------


def build_ledger(directory: Path, version: int) -> Path:
    """A ledger file at `version`, made from the hand-written fixture SQL."""
    path = directory / f"ledger-v{version}.db"
    script = (FIXTURES / f"ledger_v{version}.sql").read_text(encoding="utf-8")
    with closing(sqlite3.connect(path)) as raw:
        raw.executescript(script)
    return path


def raw_connect(path: Path) -> closing[sqlite3.Connection]:
    """A plain autocommit connection that does not go through agent_team."""
    return closing(sqlite3.connect(path, isolation_level=None))


def read_rows(path: Path) -> Rows:
    """Every row of every table (sqlite_sequence included), in rowid order, typed."""
    with raw_connect(path) as raw:
        tables = [
            name
            for (name,) in raw.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        rows: Rows = {}
        for table in tables:
            cur = raw.execute(f"SELECT * FROM {table} ORDER BY rowid")
            columns = [d[0] for d in cur.description]
            rows[table] = [
                {c: (type(v).__name__, v) for c, v in zip(columns, row, strict=True)}
                for row in cur.fetchall()
            ]
    return rows


def read_master(path: Path) -> Master:
    """The whole schema as SQLite stores it (every table, index and autoindex)."""
    with raw_connect(path) as raw:
        return raw.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()


def read_indexes(path: Path) -> Master:
    return [entry for entry in read_master(path) if entry[0] == "index"]


def version_of(path: Path) -> int:
    with raw_connect(path) as raw:
        return schema.schema_version(raw)


def dump_of(path: Path) -> str:
    with raw_connect(path) as raw:
        return db.dump_schema(raw)


def assert_rows_kept(before: Rows, after: Rows) -> None:
    """Every row and column that existed before is still there, value and type alike."""
    for table, old_rows in before.items():
        assert table in after, f"table {table} disappeared"
        assert len(after[table]) == len(old_rows), f"{table}: row count changed"
        for old, new in zip(old_rows, after[table], strict=True):
            assert {column: new[column] for column in old} == old, f"{table}: row changed"


def assert_refuses_confluence_approval(path: Path) -> None:
    """The v4 kind CHECK is still the one in force."""
    with raw_connect(path) as raw, pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        raw.execute(
            "INSERT INTO pending_questions (question_id, thread_id, turn, transport, kind) "
            "VALUES ('probe:q1', 'probe', 1, 'local', 'confluence_approval')"
        )


def assert_still_v4(path: Path, rows: Rows, master: Master) -> None:
    assert version_of(path) == 4
    assert read_rows(path) == rows
    assert read_master(path) == master, "schema changed (a leftover pending_questions_v5?)"
    assert_refuses_confluence_approval(path)


def patched_v5(extra: str) -> tuple[str, ...]:
    """The v5 statements with `extra` right after the DROP of the old table."""
    original = schema._STEPS[5]
    at = original.index("DROP TABLE pending_questions") + 1
    return (*original[:at], extra, *original[at:])


def run_helper(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(FIXTURES / script), *args],
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
        cwd=REPO_ROOT,
        check=False,
    )


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fresh_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger made by `init_db` on a new file; the reference. Never modify it."""
    path = tmp_path_factory.mktemp("fresh") / "agent-team.db"
    assert db.init_db(path) == SCHEMA_VERSION
    return path


@pytest.fixture(params=HISTORICAL_VERSIONS, ids=lambda v: f"v{v}")
def old_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    version: int = request.param
    yield version, build_ledger(tmp_path, version)


# --- the fixtures themselves -------------------------------------------------------------


@pytest.mark.parametrize("version", HISTORICAL_VERSIONS, ids=lambda v: f"v{v}")
def test_fixture_ledger_is_that_versions_schema(tmp_path: Path, version: int) -> None:
    path = build_ledger(tmp_path, version)
    history = tmp_path / "history.db"
    with raw_connect(history) as raw:
        assert schema.migrate(raw, target=version) == version

    assert version_of(path) == version
    assert read_master(path) == read_master(history), (
        f"tests/fixtures/ledger_v{version}.sql no longer matches the v1..v{version} statements "
        "in agent_team/db/schema_steps.py; released versions are history: add a new version "
        "instead of editing one (CONTRIBUTING.md)"
    )
    rows = read_rows(path)
    assert {t for t in rows if t != "sqlite_sequence"} == TABLES_AT[version]
    for table, table_rows in rows.items():
        assert table_rows, f"fixture v{version} has no rows in {table}; the test would prove little"


# --- upgrading old ledgers ---------------------------------------------------------------


def test_upgrade_keeps_every_row(old_ledger: tuple[int, Path]) -> None:
    version, path = old_ledger
    before = read_rows(path)

    assert db.init_db(path) == SCHEMA_VERSION

    after = read_rows(path)
    assert version_of(path) == SCHEMA_VERSION
    assert set(after) == {*LEDGER_TABLES, "sqlite_sequence"}
    assert after["schema_meta"] == [{"id": ("int", 1), "schema_version": ("int", SCHEMA_VERSION)}]
    before.pop("schema_meta")
    assert_rows_kept(before, after)
    questions = after["pending_questions"]
    if version < 4:  # kind did not exist: every old question was a clarify question
        assert {q["kind"] for q in questions} == {("str", "clarify")}
    else:
        assert ("str", "plan_decision") in {q["kind"] for q in questions}
    if version < 6:  # payload_json did not exist
        assert {q["payload_json"] for q in questions} == {("NoneType", None)}
    else:
        assert ("str", "confluence_approval") in {q["kind"] for q in questions}
    for table in set(LEDGER_TABLES) - TABLES_AT[version] - {"budget_days"}:
        assert after[table] == [], f"new table {table} should start empty"
    assert day_totals(after["budget_days"]) == day_totals_of_rows(after["budget_ledger"])


def day_totals(rows: list[dict[str, Any]]) -> dict[tuple[Any, Any], tuple[Any, ...]]:
    """`budget_days` as (day, mode) -> (calls, input, output, usd)."""
    return {
        (r["day_bucket"][1], r["billing_mode"][1]): (
            r["calls"][1],
            r["input_tokens"][1],
            r["output_tokens"][1],
            round(r["usd_cost"][1], 9),
        )
        for r in rows
    }


def day_totals_of_rows(rows: list[dict[str, Any]]) -> dict[tuple[Any, Any], tuple[Any, ...]]:
    """What v12 fills `budget_days` with: each day's budget rows summed per billing mode."""
    sums: dict[tuple[Any, Any], list[Any]] = {}
    for r in rows:
        total = sums.setdefault((r["day_bucket"][1], r["billing_mode"][1]), [0, 0, 0, 0.0])
        total[0] += 1
        total[1] += r["input_tokens"][1]
        total[2] += r["output_tokens"][1]
        total[3] += r["usd_cost"][1]
    return {key: (*total[:3], round(total[3], 9)) for key, total in sums.items()}


def test_upgrade_keeps_autoincrement_counters(old_ledger: tuple[int, Path]) -> None:
    _version, path = old_ledger
    with raw_connect(path) as raw:
        (top,) = raw.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'budget_ledger'"
        ).fetchone()
        (max_id,) = raw.execute("SELECT max(entry_id) FROM budget_ledger").fetchone()

    db.init_db(path)

    with raw_connect(path) as raw:
        raw.execute(
            "INSERT INTO budget_ledger (thread_id, stage, model, billing_mode, recorded_at, "
            "day_bucket) VALUES ('t', 'plan', 'm', 'api', '2024-08-01T00:00:00.000000Z', "
            "'2024-08-01')"
        )
        (new_id,) = raw.execute("SELECT max(entry_id) FROM budget_ledger").fetchone()
    assert new_id == top + 1
    assert top >= max_id


def test_upgraded_schema_equals_a_fresh_ledger(
    old_ledger: tuple[int, Path], fresh_ledger: Path
) -> None:
    _version, path = old_ledger

    db.init_db(path)

    assert read_indexes(path) == read_indexes(fresh_ledger)
    assert read_master(path) == read_master(fresh_ledger)
    assert dump_of(path) == dump_of(fresh_ledger) == db.dump_schema()
    with raw_connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []


def test_upgraded_indexes_are_all_there(old_ledger: tuple[int, Path]) -> None:
    _version, path = old_ledger

    db.init_db(path)

    names = {name for _type, name, _table, sql in read_indexes(path) if sql is not None}
    assert names == {
        "idx_questions_thread_status",
        "idx_questions_status",
        "idx_questions_open_channel_ref",
        "idx_budget_thread",
        "idx_transitions_thread",
        "idx_transitions_one_open",
        "idx_tasks_status",
        "idx_tasks_created",
        "idx_commands_state",
        "idx_commands_task",
        "idx_seen_events_at",
        "idx_side_effects_task",
        "idx_budget_day_covering",
        "idx_leases_owner",
        "idx_tasks_unpruned",
        "idx_automations_name",
        "idx_automations_due",
        "idx_automation_runs_claimed",
        "idx_automation_runs_task",
        "idx_audit_log_target",
        "idx_audit_log_at",
        "idx_tasks_resume_at",
        "idx_model_failures_thread",
        "idx_pull_requests_number",
        "idx_pull_requests_state",
        "idx_people_slack",
        "idx_people_github",
        "idx_api_keys_name",
        "idx_idempotency_keys_created",
        "idx_oauth_states_expires",
    }
    # The recreated partial unique index still does its job on the rebuilt table.
    with raw_connect(path) as raw:
        (ref,) = raw.execute(
            "SELECT channel_ref FROM pending_questions WHERE status = 'open' "
            "AND channel_ref IS NOT NULL LIMIT 1"
        ).fetchone()
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
            raw.execute(
                "INSERT INTO pending_questions (question_id, thread_id, turn, transport, "
                "channel_ref) VALUES ('dup:q1', 'dup', 1, 'slack', ?)",
                (ref,),
            )


def test_upgrade_keeps_question_order(old_ledger: tuple[int, Path]) -> None:
    _version, path = old_ledger
    order = [row["question_id"] for row in read_rows(path)["pending_questions"]]

    db.init_db(path)

    assert [row["question_id"] for row in read_rows(path)["pending_questions"]] == order


def test_upgraded_ledger_takes_confluence_approval(old_ledger: tuple[int, Path]) -> None:
    _version, path = old_ledger
    db.init_db(path)
    db.assert_ready(path)

    with closing(db.open_ledger(path)) as conn:
        created = db.ensure_question(
            conn,
            question_id="conf-1:q1",
            thread_id="conf-1",
            turn=1,
            kind="confluence_approval",
            transport="slack",
            deadline_at=None,
            payload_json='{"text": "publish this page?"}',
        )
    assert created is True
    with raw_connect(path) as raw:
        row = raw.execute(
            "SELECT kind, status, payload_json FROM pending_questions WHERE question_id = ?",
            ("conf-1:q1",),
        ).fetchone()
        assert row == ("confluence_approval", "open", '{"text": "publish this page?"}')
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            raw.execute(
                "INSERT INTO pending_questions (question_id, thread_id, turn, transport, kind) "
                "VALUES ('conf-1:q2', 'conf-1', 2, 'slack', 'not_a_kind')"
            )


def test_v12_to_v13_gives_every_task_no_pause_and_adds_the_failures_table(
    tmp_path: Path,
) -> None:
    """Tasks of a v12 ledger (one parked on the budget) keep every column, get no
    `resume_at` and a `model_parks` of 0, and are then parked and found by the v13 functions."""
    path = tmp_path / "ledger-v12.db"
    stamp = "2026-12-01T09:00:00.000000Z"
    with raw_connect(path) as raw:
        assert schema.migrate(raw, target=12) == 12
        for task_id, status, reason in (("t-run", "running", None), ("t-budget", "parked", "x")):
            raw.execute(
                "INSERT INTO tasks (id, kind, source, title, status, phase, parked_reason, "
                "created_at, updated_at) VALUES (?, 'code', 'cli', 'T', ?, 'plan', ?, ?, ?)",
                (task_id, status, reason, stamp, stamp),
            )
    before = read_rows(path)
    assert "model_failures" not in before

    assert db.init_db(path) == SCHEMA_VERSION
    db.assert_ready(path)

    after = read_rows(path)
    assert_rows_kept({t: r for t, r in before.items() if t != "schema_meta"}, after)
    assert [(r["resume_at"], r["model_parks"]) for r in after["tasks"]] == [
        (("NoneType", None), ("int", 0))
    ] * 2
    assert after["model_failures"] == []
    indexes = {name for _type, name, _table, _sql in read_indexes(path)}
    assert {"idx_tasks_resume_at", "idx_model_failures_thread"} <= indexes
    with raw_connect(path) as raw, pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        raw.execute("UPDATE tasks SET model_parks = -1 WHERE id = 't-run'")

    now = datetime(2026, 12, 1, 10, tzinfo=UTC)
    with closing(db.open_ledger(path)) as conn:
        resume_at = db.park_for_models(conn, "t-run", pauses=[timedelta(minutes=1)], now=now)
        assert resume_at == now + timedelta(minutes=1)
        assert [t.id for t in db.due_model_parks(conn, now=resume_at)] == ["t-run"]
        assert db.due_model_parks(conn, now=now) == []


def test_v13_to_v14_keeps_every_question_and_takes_the_pull_request_kinds(
    tmp_path: Path,
) -> None:
    """The v14 rebuild of `pending_questions` keeps every row and column (payload, resume
    time), its indexes, and then takes the PR gate's kinds and refuses others."""
    path = tmp_path / "ledger-v13.db"
    stamp = "2026-12-01T09:00:00.000000Z"
    with raw_connect(path) as raw:
        assert schema.migrate(raw, target=13) == 13
        for turn, (kind, status) in enumerate(
            [
                ("clarify", "answered"),
                ("plan_decision", "answered"),
                ("confluence_approval", "open"),
            ],
            start=1,
        ):
            raw.execute(
                "INSERT INTO pending_questions (question_id, thread_id, turn, status, transport, "
                "kind, payload_json, resumed_at, answer_json, channel_ref) "
                "VALUES (?, 't1', ?, ?, 'local', ?, ?, ?, ?, ?)",
                (
                    f"t1:q{turn}",
                    turn,
                    status,
                    kind,
                    f'{{"text": "q{turn}"}}',
                    stamp if status == "answered" else None,
                    '{"text": "a"}' if status == "answered" else None,
                    f"C1:{turn}.0",
                ),
            )
    before = read_rows(path)

    assert db.init_db(path) == SCHEMA_VERSION
    db.assert_ready(path)
    after = read_rows(path)
    assert_rows_kept({t: r for t, r in before.items() if t != "schema_meta"}, after)
    assert after["pull_requests"] == [] and after["pr_events"] == []
    indexes = {name for _type, name, _table, _sql in read_indexes(path)}
    assert {
        "idx_questions_status",
        "idx_questions_thread_status",
        "idx_questions_open_channel_ref",
        "idx_pull_requests_number",
    } <= indexes
    with raw_connect(path) as raw:
        for turn, kind in ((4, "pull_request"), (5, "pr_decision")):
            raw.execute(
                "INSERT INTO pending_questions (question_id, thread_id, turn, transport, kind) "
                "VALUES (?, 't1', ?, 'local', ?)",
                (f"t1:q{turn}", turn, kind),
            )
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            raw.execute(
                "INSERT INTO pending_questions (question_id, thread_id, turn, transport, kind) "
                "VALUES ('t1:q6', 't1', 6, 'local', 'merge_now')"
            )
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):  # one open post per ref
            raw.execute("UPDATE pending_questions SET channel_ref = 'C1:3.0' WHERE turn = 4")


def test_v15_to_v16_keeps_every_task_and_adds_the_idempotency_keys(tmp_path: Path) -> None:
    """A v15 ledger's tasks stay as they were; the new table starts empty, and the first
    keyed submit after the upgrade makes its task once."""
    path = tmp_path / "ledger-v15.db"
    stamp = "2026-12-01T09:00:00.000000Z"
    with raw_connect(path) as raw:
        assert schema.migrate(raw, target=15) == 15
        raw.execute(
            "INSERT INTO tasks (id, kind, source, title, created_at, updated_at) "
            "VALUES ('t-old', 'code', 'dashboard', 'T', ?, ?)",
            (stamp, stamp),
        )
    before = read_rows(path)
    assert "idempotency_keys" not in before

    assert db.init_db(path) == SCHEMA_VERSION
    db.assert_ready(path)
    after = read_rows(path)
    assert_rows_kept({t: r for t, r in before.items() if t != "schema_meta"}, after)
    assert after["idempotency_keys"] == []
    indexes = {name for _type, name, _table, _sql in read_indexes(path)}
    assert "idx_idempotency_keys_created" in indexes

    key = db.IdempotencyKey("dashboard:ada", "k-1", "f" * 64)
    now = datetime(2026, 12, 1, 10, tzinfo=UTC)
    with closing(db.open_ledger(path)) as conn:
        made = [
            db.create_task_once(conn, key, now=now, task_id=f"t-{n}", kind="code", title="T")
            for n in (1, 2)
        ]
        assert [(kept.task_id, kept.created) for kept in made] == [("t-1", True), ("t-1", False)]
        assert db.get_task(conn, "t-2") is None


def test_v16_to_v17_keeps_every_row_and_adds_the_oauth_states(tmp_path: Path) -> None:
    """A v16 ledger's people stay as they were; the new table starts empty, and a state
    saved after the upgrade is spent once."""
    path = tmp_path / "ledger-v16.db"
    stamp = "2026-12-01T09:00:00.000000Z"
    with raw_connect(path) as raw:
        assert schema.migrate(raw, target=16) == 16
        raw.execute(
            "INSERT INTO people (name, role, github_login, created_at, updated_at) "
            "VALUES ('ada', 'owner', 'ada-l', ?, ?)",
            (stamp, stamp),
        )
    before = read_rows(path)
    assert "oauth_states" not in before

    assert db.init_db(path) == SCHEMA_VERSION
    db.assert_ready(path)
    after = read_rows(path)
    assert_rows_kept({t: r for t, r in before.items() if t != "schema_meta"}, after)
    assert after["oauth_states"] == []
    indexes = {name for _type, name, _table, _sql in read_indexes(path)}
    assert "idx_oauth_states_expires" in indexes

    now = datetime(2026, 12, 1, 10, tzinfo=UTC)
    with closing(db.open_ledger(path)) as conn:
        db.save_oauth_state(conn, "a" * 64, next_path="/inbox", now=now)
        spent = [db.spend_oauth_state(conn, "a" * 64, now=now).outcome for _ in range(2)]
        assert spent == ["ok", "used"]


def test_v17_to_v18_keeps_every_row_and_adds_the_daemons(tmp_path: Path) -> None:
    """A v17 ledger's leases stay as they were; the daemons table starts empty, and a daemon
    registered after the upgrade is listed with the loop it holds."""
    path = tmp_path / "ledger-v17.db"
    with raw_connect(path) as raw:
        assert schema.migrate(raw, target=17) == 17
        raw.execute(
            "INSERT INTO leases (name, owner, epoch, lease_until) "
            "VALUES ('loop:timers', 'h:1:s', 2, '2999-01-01T00:00:00.000000Z')"
        )
    before = read_rows(path)
    assert "daemons" not in before

    assert db.init_db(path) == SCHEMA_VERSION == 18
    db.assert_ready(path)
    after = read_rows(path)
    assert_rows_kept({t: r for t, r in before.items() if t != "schema_meta"}, after)
    assert after["daemons"] == []

    now = datetime(2026, 12, 1, 10, tzinfo=UTC)
    with closing(db.open_ledger(path)) as conn:
        db.register_daemon(
            conn,
            db.DaemonStart("h:1:s", "h", 1, "1.0", None, 30.0, started_at=now),
            now=now,
        )
        (row,) = db.list_daemons(conn)
        assert (row.instance_id, row.last_seen_at, row.stopped_at) == (
            "h:1:s",
            db.to_iso(now),
            None,
        )
        (held,) = db.held_leases(conn, now=now)
        assert (held.name, held.owner) == ("loop:timers", "h:1:s")


# --- a failure in the middle of the v5 rebuild -------------------------------------------


def test_error_mid_v5_rebuild_leaves_v4_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = build_ledger(tmp_path, 4)
    rows, master = read_rows(path), read_master(path)
    original = schema._STEPS[5]
    # Only fails because the DROP before it ran, inside the step's transaction.
    monkeypatch.setitem(schema._STEPS, 5, patched_v5("SELECT count(*) FROM pending_questions"))

    with pytest.raises(LedgerStorageError, match="no such table: pending_questions"):
        db.init_db(path)

    assert_still_v4(path, rows, master)

    monkeypatch.undo()
    assert schema._STEPS[5] == original
    assert db.init_db(path) == SCHEMA_VERSION
    after = read_rows(path)
    rows.pop("schema_meta")
    assert_rows_kept(rows, after)
    assert dump_of(path) == db.dump_schema()


def test_crash_mid_v5_rebuild_leaves_v4_intact(tmp_path: Path) -> None:
    path = build_ledger(tmp_path, 4)
    rows, master = read_rows(path), read_master(path)

    proc = run_helper("crash_mid_v5.py", str(path))

    assert proc.returncode == CRASH_EXIT_CODE, (
        f"the helper should have died mid-v5 (exit {CRASH_EXIT_CODE}), got {proc.returncode}: "
        f"{proc.stderr}"
    )
    assert "exiting mid-v5 after DROP TABLE pending_questions" in proc.stderr
    assert_still_v4(path, rows, master)

    assert db.init_db(path) == SCHEMA_VERSION
    rows.pop("schema_meta")
    assert_rows_kept(rows, read_rows(path))
    assert dump_of(path) == db.dump_schema()


# --- a ledger newer than the code --------------------------------------------------------


def test_newer_ledger_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    newer = SCHEMA_VERSION + 1
    db.init_db(path)
    with raw_connect(path) as raw:
        raw.execute("UPDATE schema_meta SET schema_version = ?", (newer,))
        raw.execute("CREATE TABLE from_the_future (id INTEGER PRIMARY KEY)")
    content = path.read_bytes()

    with pytest.raises(SchemaTooNewError) as from_init:
        db.init_db(path)
    with pytest.raises(SchemaTooNewError) as from_ready:
        db.assert_ready(path)

    for error in (from_init, from_ready):
        message = str(error.value)
        assert path.name in message, f"message should name the ledger file: {message}"
        for spelling in (str(path.resolve()), str(path)):
            message = message.replace(spelling, "<ledger>")
        numbers = re.findall(r"\d+", message)
        assert str(newer) in numbers, f"message should name the ledger's version: {error.value}"
        assert str(SCHEMA_VERSION) in numbers, f"message should name ours: {error.value}"
    assert path.read_bytes() == content
    assert version_of(path) == newer


# --- assert_ready ------------------------------------------------------------------------


def test_assert_ready_passes_on_a_fresh_ledger(fresh_ledger: Path) -> None:
    content = fresh_ledger.read_bytes()

    db.assert_ready(fresh_ledger)

    assert fresh_ledger.read_bytes() == content


def test_assert_ready_refuses_a_missing_file_and_does_not_create_it(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "agent-team.db"

    with pytest.raises(LedgerNotReadyError, match="migrate"):
        db.assert_ready(path)

    assert not path.exists()
    assert not path.parent.exists()


def test_assert_ready_refuses_an_old_ledger(old_ledger: tuple[int, Path]) -> None:
    version, path = old_ledger
    content = path.read_bytes()

    with pytest.raises(LedgerNotReadyError, match=rf"schema version {version}\b.*migrate"):
        db.assert_ready(path)

    assert path.read_bytes() == content


def _copy(fresh_ledger: Path, tmp_path: Path) -> Path:
    path = tmp_path / "broken.db"
    shutil.copyfile(fresh_ledger, path)
    return path


@pytest.mark.parametrize("table", LEDGER_TABLES)
def test_assert_ready_refuses_a_missing_table(
    fresh_ledger: Path, tmp_path: Path, table: str
) -> None:
    path = _copy(fresh_ledger, tmp_path)
    with raw_connect(path) as raw:
        raw.execute(f"DROP TABLE {table}")

    with pytest.raises(LedgerNotReadyError) as error:
        db.assert_ready(path)

    if table == "schema_meta":  # without it there is no version at all
        assert "schema version 0" in str(error.value)
    else:
        assert repr(table) in str(error.value)


_MISSING_COLUMN_CASES = [
    pytest.param(table, column, id=f"{table}.{column}")
    for table, columns in REQUIRED_COLUMNS.items()
    for column in columns
]


@pytest.mark.parametrize(("table", "column"), _MISSING_COLUMN_CASES)
def test_assert_ready_refuses_a_missing_column(
    fresh_ledger: Path, tmp_path: Path, table: str, column: str
) -> None:
    path = _copy(fresh_ledger, tmp_path)
    keep = ", ".join(c for c in REQUIRED_COLUMNS[table] if c != column)
    with raw_connect(path) as raw:
        raw.executescript(
            f"CREATE TABLE {table}_cut AS SELECT {keep} FROM {table};"
            f"DROP TABLE {table};"
            f"ALTER TABLE {table}_cut RENAME TO {table};"
        )
    with raw_connect(path) as raw:
        present = {row[1] for row in raw.execute(f"PRAGMA table_info({table})")}
    assert column not in present

    with pytest.raises(LedgerNotReadyError) as error:
        db.assert_ready(path)

    message = str(error.value)
    assert re.search(rf"\b{column}\b", message), message
    if table != "schema_meta":  # a broken schema_meta is reported as "not a ledger"
        assert repr(table) in message


# --- init_db: idempotent, and safe when processes start together ------------------------


def test_init_db_twice_changes_nothing(tmp_path: Path) -> None:
    path = build_ledger(tmp_path, 4)
    db.init_db(path)
    with raw_connect(path) as raw:  # rows in the v6 tables too
        raw.execute(
            "INSERT INTO tasks (id, kind, source, title, created_at, updated_at) VALUES "
            "('t-1', 'code', 'cli', 'fix it', '2024-08-01T00:00:00.000000Z', "
            "'2024-08-01T00:00:00.000000Z')"
        )
        raw.execute(
            "INSERT INTO commands (command_id, kind, task_id, created_at) VALUES "
            "('start:t-1', 'start', 't-1', '2024-08-01T00:00:00.000000Z')"
        )
        raw.execute(  # and in the v7 and v8 ones
            "INSERT INTO seen_events VALUES ('slack', 'Ev1', '2024-08-01T00:00:00.000000Z')"
        )
        raw.execute(
            "INSERT INTO side_effects (effect_id, task_id, kind, created_at, updated_at) VALUES "
            "('slack:post:t-1', 't-1', 'slack_post', '2024-08-01T00:00:00.000000Z', "
            "'2024-08-01T00:00:00.000000Z')"
        )
        raw.execute("INSERT INTO intake_cursors (source, label) VALUES ('github:o/r', 'x')")
        raw.execute("INSERT INTO leases (name, owner, epoch) VALUES ('task:t-1', 'h:1:s', 3)")
    with closing(db.open_ledger(path)) as conn:  # and in the v10 ones, through their functions
        automation = db.create_automation(
            conn,
            values={
                "automation_id": "a-1",
                "name": "nightly",
                "title": "Nightly",
                "body": "Update the page",
                "schedule_kind": "every",
                "every_s": 86400,
                "first_run_at": "2024-08-01T00:00:00.000000Z",
                "next_run_at": "2024-08-01T00:00:00.000000Z",
                "created_by": "cli:ada",
            },
            audit=db.AuditEntry("ada", "cli", "automation.create", "a-1"),
        )
        assert db.claim_slot(
            conn,
            automation_id=automation.automation_id,
            expected_next=automation.next_run_at,
            slot_at="2024-08-01T00:00:00.000000Z",
            next_run_at="2024-08-02T00:00:00.000000Z",
            missed=0,
            run_id="a-1@1",
            task_id="t-2",
            claimed_by="h:1:s",
        )
        db.record_model_failure(  # and in the v13 one
            conn,
            thread_id="t-1",
            stage="plan",
            model="anthropic:claude-sonnet-4-5",
            attempt=1,
            outcome="retried",
            http_status=529,
            detail="overloaded_error",
            at=datetime(2024, 8, 1, tzinfo=UTC),
        )
        db.watch_pull_request(  # and in the v14 ones
            conn,
            task_id="t-1",
            repo="acme/app",
            number=3,
            url="https://github.example/acme/app/pull/3",
            head_sha=None,
            at=datetime(2024, 8, 1, tzinfo=UTC),
        )
        db.record_pr_event(
            conn,
            "t-1",
            db.NewPrEvent("pr:merged", "merged"),
            at=datetime(2024, 8, 1, tzinfo=UTC),
        )
        db.add_person(conn, name="ada", role="owner", slack_id="U0ADA")  # and the v15 ones
        db.add_key(conn, name="ada", key_id="k1k1k1k1", key_hash="0" * 64)
        db.create_task_once(  # and in the v16 one
            conn,
            db.IdempotencyKey("dashboard:ada", "k-1", "f" * 64),
            now=datetime(2024, 8, 1, tzinfo=UTC),
            task_id="t-3",
            kind="code",
            title="Keyed",
        )
        db.save_oauth_state(  # and in the v17 one
            conn, "e" * 64, next_path="/", now=datetime(2024, 8, 1, tzinfo=UTC)
        )
        started = datetime(2024, 8, 1, tzinfo=UTC)
        db.register_daemon(  # and in the v18 one
            conn,
            db.DaemonStart("h:1:s", "h", 1, "1.0", "http://h:8080/", 30.0, started_at=started),
            now=started,
        )
        counts = db.table_counts(conn)
    rows, dump, content = read_rows(path), dump_of(path), path.read_bytes()
    assert all(counts.values()), counts

    assert db.init_db(path) == SCHEMA_VERSION

    with closing(db.open_ledger(path)) as conn:
        assert db.table_counts(conn) == counts
    assert dump_of(path) == dump
    assert read_rows(path) == rows
    assert path.read_bytes() == content


def test_init_db_twice_on_a_new_file(tmp_path: Path, fresh_ledger: Path) -> None:
    path = tmp_path / "agent-team.db"
    assert db.init_db(path) == SCHEMA_VERSION
    master, rows = read_master(path), read_rows(path)

    assert db.init_db(path) == SCHEMA_VERSION

    assert read_master(path) == master == read_master(fresh_ledger)
    assert read_rows(path) == rows


# Regression: `PRAGMA journal_mode = WAL` on a file not yet in WAL mode upgrades a read
# lock, and SQLite never calls the busy handler for that upgrade; connect() now waits for
# the other writer itself instead of failing at once with "database is locked".
WRITER_HOLDS_S = 0.5  # far below the busy timeout, far above how long init_db needs to try
RACE_WORKERS = 2  # more workers do not collide more often (and CI may have 2 CPUs)
RACE_ROUNDS = 40  # on an idle machine 25-50% of rounds hit the bug; under load far fewer


def _new_or_v4(tmp_path: Path, start: str) -> Path:
    return tmp_path / "new" / "agent-team.db" if start == "new" else build_ledger(tmp_path, 4)


@pytest.mark.parametrize("start", ["new", "v4"])
def test_init_db_waits_for_another_writer_instead_of_failing(tmp_path: Path, start: str) -> None:
    """The deterministic form of the start-up race below: a writer holds the lock briefly."""
    path = _new_or_v4(tmp_path, start)
    path.parent.mkdir(exist_ok=True)
    outcome: dict[str, object] = {}

    def start_up() -> None:
        try:
            outcome["version"] = db.init_db(path)
        except Exception as exc:
            outcome["error"] = exc

    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        thread = threading.Thread(target=start_up)
        thread.start()
        # Poll "did init_db give up?" with a deadline; the lock is held all the while.
        thread.join(timeout=WRITER_HOLDS_S)
        gave_up_while_locked = not thread.is_alive()
        writer.execute("COMMIT")
    finally:
        writer.close()
    thread.join(timeout=SUBPROCESS_TIMEOUT_S)

    assert not thread.is_alive()
    assert "error" not in outcome, (
        f"init_db failed {'while' if gave_up_while_locked else 'after'} another connection "
        f"held the write lock for {WRITER_HOLDS_S} s: {outcome.get('error')!r}"
    )
    assert outcome["version"] == SCHEMA_VERSION
    assert version_of(path) == SCHEMA_VERSION


# Black-box twin of the test above: real processes start up on one file at once (how
# often they collide depends on the machine's load).
@pytest.mark.parametrize("start", ["new", pytest.param("v4", marks=pytest.mark.slow)])
def test_processes_starting_together_all_reach_current(
    tmp_path: Path, fresh_ledger: Path, start: str
) -> None:
    template = build_ledger(tmp_path, 4)
    before = read_rows(template)
    paths: list[Path] = []
    for round_ in range(RACE_ROUNDS):
        path = tmp_path / f"round{round_}" / "agent-team.db"
        if start == "v4":
            path.parent.mkdir()
            shutil.copyfile(template, path)
        paths.append(path)
    helper = [sys.executable, str(FIXTURES / "init_db_on_signal.py")]

    answers: list[list[str]] = []
    with ExitStack() as stack:
        procs = [
            stack.enter_context(
                subprocess.Popen(
                    helper,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd=REPO_ROOT,
                )
            )
            for _ in range(RACE_WORKERS)
        ]
        try:
            pipes = [(proc.stdin, proc.stdout) for proc in procs]
            assert [stdout.readline().strip() for _, stdout in pipes if stdout] == (
                ["ready"] * RACE_WORKERS
            )
            for path in paths:
                go_lock = tmp_path / f"go-{path.parent.name}.lock"
                with open(go_lock, "w", encoding="utf-8") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)
                    for stdin, _ in pipes:
                        assert stdin is not None
                        stdin.write(f"{path} {go_lock}\n")
                        stdin.flush()
                    armed = [stdout.readline().strip() for _, stdout in pipes if stdout]
                    assert armed == ["armed"] * RACE_WORKERS
                    fcntl.flock(lock, fcntl.LOCK_UN)  # go: wakes every worker at once
                answers.append([stdout.readline().strip() for _, stdout in pipes if stdout])
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.close()
                assert proc.wait(timeout=SUBPROCESS_TIMEOUT_S) == 0
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()

    failed = [
        (path.parent.name, answer)
        for path, answer in zip(paths, answers, strict=True)
        if answer != [str(SCHEMA_VERSION)] * RACE_WORKERS
    ]
    assert not failed, f"{len(failed)} of {RACE_ROUNDS} rounds had a failing init_db: {failed[:2]}"
    reference = read_master(fresh_ledger)
    for path in paths:
        assert read_master(path) == reference, path
        assert version_of(path) == SCHEMA_VERSION, path
    db.assert_ready(paths[-1])
    after = read_rows(paths[-1])
    assert after["schema_meta"] == [{"id": ("int", 1), "schema_version": ("int", SCHEMA_VERSION)}]
    if start == "v4":
        before.pop("schema_meta")
        assert_rows_kept(before, after)


def test_v11_drops_what_tasks_pruned_before_it_no_longer_need(tmp_path: Path) -> None:
    """The retention pass never visits a pruned task again, so v11 does its new part once."""
    path = tmp_path / "v10.db"
    with raw_connect(path) as raw:
        raw.isolation_level = None
        assert schema.migrate(raw, target=10) == 10
        raw.executescript(
            """
            INSERT INTO tasks (id, kind, source, title, status, phase, created_at, updated_at,
                checkpoints_pruned_at)
            VALUES ('t-pruned', 'code', 'cli', 'Old', 'done', 'done', 'a', 'b', 'c'),
                   ('t-done', 'code', 'cli', 'Kept', 'done', 'done', 'a', 'b', NULL);
            INSERT INTO pending_questions (question_id, thread_id, turn, status, transport,
                answered_at)
            VALUES ('t-pruned:q1', 't-pruned', 1, 'answered', 'local', 'x'),
                   ('t-done:q1', 't-done', 1, 'answered', 'local', 'x');
            INSERT INTO commands (command_id, kind, task_id, state, created_at, done_at, error)
            VALUES ('start:t-pruned', 'start', 't-pruned', 'done', 'a', 'd1', NULL),
                   ('resume:t-pruned:q1', 'resume', 't-pruned', 'done', 'a', 'd2', NULL),
                   ('recover:t-pruned:1', 'start', 't-pruned', 'failed', 'a', 'd3', 'boom'),
                   ('resume:t-done:q1', 'resume', 't-done', 'done', 'a', 'd4', NULL);
            INSERT INTO leases (name, owner, epoch, takeovers)
            VALUES ('task:t-pruned', NULL, 3, 2), ('task:t-done', NULL, 1, 1);
            """
        )

    assert db.init_db(path) == SCHEMA_VERSION

    with raw_connect(path) as raw:
        assert raw.execute("SELECT command_id FROM commands ORDER BY command_id").fetchall() == [
            ("recover:t-pruned:1",),
            ("resume:t-done:q1",),
        ]
        assert raw.execute(
            "SELECT question_id, resumed_at FROM pending_questions ORDER BY question_id"
        ).fetchall() == [("t-done:q1", None), ("t-pruned:q1", "d2")]
        assert raw.execute(
            "SELECT name, owner, epoch, takeovers FROM leases ORDER BY name"
        ).fetchall() == [
            ("task:", None, 0, 2),
            ("task:t-done", None, 1, 1),
        ]
