"""`agent-team migrate-to-postgres`: a SQLite ledger with tasks in every status, into PostgreSQL.

The source is made once per module by driving real tasks through a coordinator
(offline model, offline builder): one done, one failed in its build, one
cancelled, one parked on an expired plan question, one waiting on its plan
decision, one cut short in the middle of its build (the file is backed up while
the build runs, as `kill -9` would leave it) and one queued. Each test copies
that file, migrates it into a fresh database and checks what a person (the
dashboard, `show`) and the daemon (the checkpoints, the ids) see there.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic import SecretStr
from starlette.testclient import TestClient

from agent_team import db
from agent_team.automations import service
from agent_team.builders.base import BuildResult, BuildTask
from agent_team.config import ENV_PREFIX, load_settings
from agent_team.dashboard import DashboardContext, create_app
from agent_team.db import transfer
from agent_team.db.schema import REQUIRED_COLUMNS, migrate
from agent_team.db.transfer import RUNTIME_ONLY, copied_tables
from agent_team.exceptions import BuildError, LedgerStorageError
from agent_team.service.wiring import build_coordinator
from tests.integration.pipeline.conftest import (
    LONG_BODY,
    Clock,
    RecordingTransport,
    open_question,
    task_of,
)
from tests.integration.pipeline.test_coordinator import APPROVED_JOURNEY, journey
from tests.integration.test_cli import assert_one_line_error, cells, run_cli

# Ids, SQLite's rowids, exact costs and text, as both sides must hold them.
KEYS = (
    "SELECT transition_id, thread_id, to_phase, status FROM task_transitions ORDER BY 1",
    "SELECT entry_id, thread_id, stage, usd_cost FROM budget_ledger ORDER BY 1",
    "SELECT failure_id, thread_id, model, attempt, outcome, http_status, detail "
    "FROM model_failures ORDER BY 1",
    "SELECT id, title, body FROM tasks ORDER BY id",
    "SELECT rowid, id, status FROM tasks ORDER BY rowid",
    "SELECT rowid, question_id, status FROM pending_questions ORDER BY rowid",
    "SELECT rowid, command_id, kind, task_id FROM commands ORDER BY rowid",
)
STATUSES = ("queued", "running", "waiting", "parked", "done", "failed", "cancelled")
TOKEN = "migrate-token"
PASSWORD = "hunter2"


@dataclass(frozen=True)
class Source:
    path: Path
    tasks: dict[str, str]  # status -> task id
    questions: dict[str, str]  # status -> the task's plan question
    now: datetime


@pytest.fixture(autouse=True)
def _no_agent_team_env(isolated_env: Path) -> None:
    """Settings come from the test alone."""


def _build_source(root: Path) -> Source:
    clock = Clock()
    settings = load_settings(db_path=root / "live" / "agent-team.db", state_dir=root / "state")
    coordinator = build_coordinator(settings, transport=RecordingTransport(), clock=clock)
    tasks: dict[str, str] = {}
    questions: dict[str, str] = {}
    in_build, go_on = threading.Event(), threading.Event()
    original = coordinator.deps.build

    def build(task: BuildTask, plan: str) -> BuildResult:
        if task.task_id == tasks.get("failed"):
            raise BuildError("the tests broke (exit 3)")
        if task.task_id == tasks.get("running"):
            in_build.set()
            assert go_on.wait(60), "the test never let the build finish"
        return original(task, plan)

    coordinator.deps.build = build

    def to_plan(status: str) -> str:
        task_id = coordinator.start_task(title=f"A {status} task", body=LONG_BODY)
        coordinator.tick(until_idle=True, timeout_s=60)
        tasks[status] = task_id
        questions[status] = open_question(coordinator, task_id).question_id
        return questions[status]

    runner: threading.Thread | None = None
    try:
        for status in ("done", "failed"):
            coordinator.answer(to_plan(status), "approve", via="cli:tester")
            coordinator.tick(until_idle=True, timeout_s=60)
        to_plan("cancelled")
        coordinator.cancel(tasks["cancelled"])
        coordinator.tick(until_idle=True, timeout_s=60)
        to_plan("parked")
        clock.advance(hours=73)  # past the plan question's 72 h
        assert coordinator.check_deadlines() == 1
        to_plan("waiting")

        # The outside world's records, so every copied table has rows.
        ledger = coordinator.ledger
        assert db.claim_event(ledger, source="slack", event_id="Ev0001")
        assert db.record_issue_ingested(ledger, source="github:acme/app", issue_id=7)
        db.begin_effect(ledger, effect_id="slack:post:1", task_id=tasks["done"], kind="post")
        assert db.finish_effect(ledger, effect_id="slack:post:1", result_ref="C1:1700.1")
        db.record_poll(ledger, source="github:acme/app", label="agent-team", status=200, etag="W/1")
        assert db.acquire_lease(ledger, name="loop:deadlines", owner="old-daemon", lease_s=60)
        nightly = service.create(  # an automation (audited) and one run of it
            ledger,
            service.AutomationRequest(
                name="nightly docs", title="Docs", body=LONG_BODY, every="1d"
            ),
            actor=service.Actor("tester", "cli"),
            now=clock.now,
        )
        run = db.claim_slot(
            ledger,
            automation_id=nightly.automation_id,
            expected_next=nightly.next_run_at,
            slot_at=str(nightly.next_run_at),
            next_run_at=None,
            missed=2,
            run_id=f"{nightly.automation_id}@1",
            task_id="t-never-made",
            claimed_by="old-daemon",
        )
        assert run is not None
        assert db.finish_run(ledger, run_id=run.run_id, status="skipped_budget", detail="cap")
        # A cost no decimal shortcut keeps exactly.
        assert db.record_usage(
            ledger,
            thread_id=tasks["done"],
            stage="build",
            model="anthropic:claude-test",
            billing_mode="api",
            input_tokens=3,
            output_tokens=4,
            usd_cost=0.1 + 0.2,
        )
        db.record_model_failure(
            ledger,
            thread_id=tasks["done"],
            stage="plan",
            model="anthropic:claude-test",
            attempt=1,
            outcome="fell_back",
            http_status=529,
            detail="overloaded_error: é — ✓",
            at=clock.now,
        )
        db.watch_pull_request(
            ledger,
            task_id=tasks["done"],
            repo="acme/app",
            number=7,
            url="https://github.example/acme/app/pull/7",
            head_sha="a" * 40,
            at=clock.now,
        )
        db.record_pr_event(
            ledger,
            tasks["done"],
            db.NewPrEvent("review:1", "review", round=1, actor="rö", detail={"id": 1}),
            at=clock.now,
        )
        db.add_person(ledger, name="zoë", role="owner", github_login="zoe")
        db.add_key(ledger, name="zoë", key_id="abcdabcdabcd", key_hash="f" * 64)
        kept = db.create_task_once(  # a keyed submit's key (the task itself is done below)
            ledger,
            db.IdempotencyKey("dashboard:ada", "key-é", "f" * 64),
            now=clock.now,
            task_id="t-keyed",
            kind="code",
            title="Keyed",
        )
        assert kept.created
        assert db.set_task_status(ledger, "t-keyed", "cancelled")
        # A GitHub sign-in begun (its state's hash only).
        db.save_oauth_state(ledger, "e" * 64, next_path="/task/ö", now=clock.now)
        # A daemon that ran on the file and stopped (its row is the ledger's history).
        started = db.DaemonStart(
            "höst:42:20261201T000000.000000Z", "höst", 42, "1.0", None, 30.0, started_at=clock.now
        )
        db.register_daemon(ledger, started, now=clock.now)
        assert db.daemon_stopped(ledger, started.instance_id, now=clock.now)

        coordinator.answer(to_plan("running"), "approve", via="cli:tester")
        runner = threading.Thread(
            target=coordinator.tick, kwargs={"until_idle": True, "timeout_s": 120}
        )
        runner.start()
        assert in_build.wait(60), "the running task never reached its build"
        # The worker is busy with that build, so nothing picks this one up before the copy.
        tasks["queued"] = coordinator.start_task(title="A queued task: é — ✓", body=LONG_BODY)
        made, _ = db.backup_ledger(settings.db_path, root / "backup", keep=1)
    finally:
        go_on.set()
        if runner is not None:
            runner.join(120)
        coordinator.close()
    with db.open_ledger(made, readonly=True) as snapshot:
        found = {status: db.get_task(snapshot, task_id) for status, task_id in tasks.items()}
    assert {s: task.status if task else None for s, task in found.items()} == {
        status: status for status in STATUSES
    }, "the source should hold a task in every status"
    return Source(path=made, tasks=tasks, questions=questions, now=clock.now)


@pytest.fixture(scope="module")
def _template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    root = tmp_path_factory.mktemp("source")
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.upper().startswith(ENV_PREFIX):
                patch.delenv(name)
        patch.chdir(root)
        yield _build_source(root)


@pytest.fixture
def source(_template: Source, tmp_path: Path) -> Source:
    """A private copy of the module's source ledger (its own folder, so its own lock file)."""
    path = tmp_path / "file" / "agent-team.db"
    path.parent.mkdir()
    with closing(sqlite3.connect(_template.path)) as src, closing(sqlite3.connect(path)) as dst:
        src.backup(dst)
    return Source(
        path=path, tasks=_template.tasks, questions=_template.questions, now=_template.now
    )


def with_password(url: str) -> str:
    # The test server trusts local connections, so any password is accepted (and must not show).
    return url.replace("postgres@", f"postgres:{PASSWORD}@", 1)


def sqlite_rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return [tuple(row) for row in conn.execute(sql)]


def pg_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return [tuple(row) for row in conn.execute(sql)]


def pg_count(url: str, table: str) -> int:
    return int(pg_rows(url, f"SELECT count(*) FROM {table}")[0][0])


def sqlite_count(path: Path, table: str) -> int:
    return int(sqlite_rows(path, f"SELECT count(*) FROM {table}")[0][0])


class _Holder:
    """What `DashboardContext` uses of a coordinator: a ledger to read and a wake event."""

    def __init__(self, ledger: db.Ledger) -> None:
        self.ledger = ledger
        self.wake = threading.Event()


def api_reports(target: str | Path, task_ids: list[str], now: datetime) -> dict[str, Any]:
    """`/api/task/<id>` of each task, from a dashboard app reading `target`."""
    settings = load_settings(db_path=Path("unused.db"), dashboard_token=SecretStr(TOKEN))
    with db.open_ledger(target, readonly=True) as ledger:
        ctx = DashboardContext(settings, coordinator=_Holder(ledger), clock=lambda: now)  # type: ignore[arg-type]
        with TestClient(create_app(ctx)) as client:
            found = {}
            for task_id in task_ids:
                response = client.get(
                    f"/api/task/{task_id}", headers={"Authorization": f"Bearer {TOKEN}"}
                )
                assert response.status_code == 200, response.text
                found[task_id] = response.json()
            return found


# A running step's duration and a deadline depend on the moment `show` runs (timefmt.span),
# and so do the widths of the table columns they are in. Whether something runs the ledger
# now (`reports.presence`) is read from the leases, which are runtime state and not copied:
# the file's last run still holds one, the copy none.
_SPAN = r"(?:\d+(?:\.\d)? m?s|\d+[dhm] \d+[hms])"
_MOVING = re.compile(rf"{_SPAN} (?:so far|\(nothing runs it now\))|in {_SPAN}|{_SPAN} ago|just now")
_RULES = re.compile(r"[ ─━]+")
_PRESENCE = re.compile(r"^no daemon is running on this ledger: .*\n", re.MULTILINE)


def steady(text: str) -> str:
    return _RULES.sub(" ", _MOVING.sub("<moment>", _PRESENCE.sub("", text)))


# -- what is copied -----------------------------------------------------------------------------


def test_every_table_but_the_runtime_ones_is_copied() -> None:
    assert RUNTIME_ONLY == {"leases", "schema_meta"}
    assert set(copied_tables()) == set(REQUIRED_COLUMNS) - RUNTIME_ONLY
    assert set(copied_tables()) == set(db.LEDGER_TABLES) - RUNTIME_ONLY


@pytest.mark.slow
def test_the_copy_answers_show_and_the_dashboard_like_the_file(
    source: Source, pg_url: str, tmp_path: Path
) -> None:
    url = with_password(pg_url)

    result = run_cli(tmp_path, "migrate-to-postgres", "--from", str(source.path), "--to", url)

    assert result.returncode == 0, result.stderr
    assert PASSWORD not in result.stdout + result.stderr
    assert "postgres:***@" in result.stdout
    for table in copied_tables():
        in_file = sqlite_count(source.path, table)
        assert in_file > 0, f"the source has no {table} rows: the test would prove nothing"
        assert pg_count(pg_url, table) == in_file, table
        assert cells(result.stdout, table)[1:] == [str(in_file), str(in_file), "0"]
    assert sqlite_count(source.path, "leases") > 0 and pg_count(pg_url, "leases") == 0
    # Queued, running, waiting, parked are live; the queued one has no checkpoint yet.
    assert "checkpoints of 4 live task(s): copied 3, already there 0" in result.stdout
    for sql in KEYS:
        assert pg_rows(pg_url, sql) == sqlite_rows(source.path, sql), sql
    # The running task's resume was claimed by the daemon that stopped: copied as pending.
    resume = db.resume_command_id(source.questions["running"])
    assert sqlite_rows(
        source.path, f"SELECT state FROM commands WHERE command_id = '{resume}'"
    ) == [("claimed",)]
    assert pg_rows(
        pg_url, f"SELECT state, claimed_by, lease_until FROM commands WHERE command_id = '{resume}'"
    ) == [("pending", None, None)]

    task_ids = list(source.tasks.values())
    moment = source.now + timedelta(minutes=5)
    assert api_reports(pg_url, task_ids, moment) == api_reports(source.path, task_ids, moment)
    for status, task_id in source.tasks.items():
        from_file = run_cli(tmp_path, "--db", str(source.path), "show", task_id)
        from_pg = run_cli(tmp_path, "show", task_id, env={"AGENT_TEAM_DATABASE_URL": pg_url})
        assert from_file.returncode == from_pg.returncode == 0, (from_file.stderr, from_pg.stderr)
        assert f"status {status}" in from_file.stdout
        assert steady(from_pg.stdout) == steady(from_file.stdout), status

    again = run_cli(tmp_path, "migrate-to-postgres", "--from", str(source.path), "--to", url)

    assert again.returncode == 0, again.stderr
    assert "nothing new to copy" in again.stdout
    assert "copied 0, already there 3" in again.stdout
    for table in copied_tables():
        in_file = sqlite_count(source.path, table)
        assert cells(again.stdout, table)[1:] == [str(in_file), "0", str(in_file)]
        assert pg_count(pg_url, table) == in_file


@pytest.mark.slow
def test_postgres_carries_on_where_the_file_stopped_and_goes_back(
    source: Source, pg_url: str, tmp_path: Path
) -> None:
    report = db.transfer_to_postgres(source.path, pg_url)
    assert report.checkpoints_copied == 3 and report.released_claims == 1
    top = {
        sql: pg_rows(pg_url, sql)[0][0]
        for sql in (
            "SELECT max(transition_id) FROM task_transitions",
            "SELECT max(entry_id) FROM budget_ledger",
            "SELECT max(rowid) FROM tasks",
            "SELECT max(rowid) FROM commands",
            "SELECT max(rowid) FROM pending_questions",
            "SELECT max(failure_id) FROM model_failures",
        )
    }
    settings = load_settings(
        database_url=pg_url, db_path=tmp_path / "unused.db", state_dir=tmp_path / "state"
    )
    coordinator = build_coordinator(
        settings, transport=RecordingTransport(), clock=Clock(source.now)
    )
    try:
        tasks = source.tasks
        coordinator.tick(until_idle=True, timeout_s=120)
        # Cut short in its build: continued from its checkpoint. Queued: started.
        assert task_of(coordinator, tasks["running"]).status == "done"
        assert task_of(coordinator, tasks["queued"]).status == "waiting"
        # Waiting on the plan: the copied interrupt takes the answer.
        coordinator.answer(source.questions["waiting"], "approve", via="cli:tester")
        coordinator.tick(until_idle=True, timeout_s=120)
        assert task_of(coordinator, tasks["waiting"]).status == "done"
        assert journey(coordinator, tasks["waiting"]) == APPROVED_JOURNEY
        # Parked on an expired question: reopened, answered, finished.
        coordinator.reopen(source.questions["parked"])
        coordinator.answer(source.questions["parked"], "approve", via="cli:tester")
        coordinator.tick(until_idle=True, timeout_s=120)
        assert task_of(coordinator, tasks["parked"]).status == "done"
        for status in ("done", "failed", "cancelled"):
            assert task_of(coordinator, tasks[status]).status == status
        submitted = coordinator.start_task(title="Born on PostgreSQL", body=LONG_BODY)
        coordinator.tick(until_idle=True, timeout_s=120)
        assert task_of(coordinator, submitted).status == "waiting"
        db.record_model_failure(
            coordinator.ledger,
            thread_id=submitted,
            stage="plan",
            model="anthropic:claude-test",
            attempt=2,
            outcome="retried",
            http_status=None,
            detail="ReadTimeout",
            at=source.now,
        )
        # Only finished tasks go back to a file.
        for task_id in (tasks["queued"], submitted):
            coordinator.cancel(task_id)
        coordinator.tick(until_idle=True, timeout_s=120)
    finally:
        coordinator.close()
    # A stopped daemon holds no lease (the worker gives each up when its run ends).
    with db.open_ledger(pg_url) as ledger:
        db.release_leases_of(ledger, coordinator.worker.consumer)
    # The new rows got ids past the copied ones (the sequences were set), none collided.
    for sql, copied_top in top.items():
        table = sql.rsplit(" ", 1)[1]
        column = sql.split("(")[1].split(")")[0]
        newer = pg_rows(pg_url, f"SELECT count(*) FROM {table} WHERE {column} > {copied_top}")
        assert newer[0][0] > 0, f"no new {table} rows after the copy?"

    back = tmp_path / "back" / "agent-team.db"
    result = run_cli(
        tmp_path, "migrate-to-postgres", "--reverse", "--from", str(back), "--to", pg_url
    )

    assert result.returncode == 0, result.stderr
    assert "next: remove AGENT_TEAM_DATABASE_URL" in result.stdout
    for table in copied_tables():
        assert sqlite_count(back, table) == pg_count(pg_url, table) > 0, table
    for sql in KEYS:
        assert sqlite_rows(back, sql) == pg_rows(pg_url, sql), sql
    every = [*tasks.values(), submitted]
    moment = source.now + timedelta(hours=1)
    assert api_reports(back, every, moment) == api_reports(pg_url, every, moment)
    with db.open_ledger(back) as ledger:
        after = db.record_transition(ledger, thread_id="later", to_phase="intake", status="queued")
    assert after > pg_rows(pg_url, "SELECT max(transition_id) FROM task_transitions")[0][0]


# -- refusals -----------------------------------------------------------------------------------


def test_refused_while_a_daemon_runs_on_the_file(
    source: Source, pg_url: str, tmp_path: Path
) -> None:
    with db.claim_daemon_slot(source.path, url="http://127.0.0.1:8765/"):
        result = run_cli(
            tmp_path, "migrate-to-postgres", "--from", str(source.path), "--to", pg_url
        )

    line = assert_one_line_error(result, 1)
    assert f"pid {os.getpid()}" in line and "http://127.0.0.1:8765/" in line
    assert "stop it first" in line
    assert pg_rows(pg_url, "SELECT to_regclass('tasks')") == [(None,)], "the target was touched"


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("to", "says"),
    [
        (f"postgresql://app:{PASSWORD}@127.0.0.1:{{port}}/agent_team", "cannot connect"),
        (f"postgresql://app:{PASSWORD}@127.0.0.1:notaport/agent_team", "not a valid URL"),
        (f"postgresql://app:{PASSWORD}@127.0.0.1:5432/", "names no database"),
        ("sqlite:///elsewhere.db", "is not a PostgreSQL URL"),
    ],
)
def test_a_bad_url_is_one_line_exit_2_without_the_password(
    source: Source, tmp_path: Path, to: str, says: str
) -> None:
    url = to.replace("{port}", str(_closed_port()))

    result = run_cli(tmp_path, "migrate-to-postgres", "--from", str(source.path), "--to", url)

    line = assert_one_line_error(result, 2)
    assert says in line and "--to" in line, line
    assert PASSWORD not in result.stdout + result.stderr
    if "app:" in url:
        assert "app:***@" in line


def test_no_target_or_no_file_is_one_line_exit_2(source: Source, tmp_path: Path) -> None:
    no_target = run_cli(tmp_path, "migrate-to-postgres", "--from", str(source.path))
    assert "--to" in assert_one_line_error(no_target, 2)
    no_file = run_cli(
        tmp_path,
        "migrate-to-postgres",
        "--from",
        str(tmp_path / "missing.db"),
        "--to",
        "postgresql://app@127.0.0.1/agent_team",
    )
    assert "missing.db: no such file" in assert_one_line_error(no_file, 2)


def test_an_older_or_newer_file_is_refused(pg_url: str, tmp_path: Path) -> None:
    old = tmp_path / "old" / "agent-team.db"
    old.parent.mkdir()
    with closing(sqlite3.connect(old, isolation_level=None)) as conn:
        migrate(conn, target=db.SCHEMA_VERSION - 1)

    result = run_cli(tmp_path, "migrate-to-postgres", "--from", str(old), "--to", pg_url)

    line = assert_one_line_error(result, 1)
    assert f"migrate --db {old}`" in line and f"schema version {db.SCHEMA_VERSION - 1}" in line
    with closing(sqlite3.connect(old, isolation_level=None)) as conn:
        migrate(conn)
        conn.execute("UPDATE schema_meta SET schema_version = 99")

    result = run_cli(tmp_path, "migrate-to-postgres", "--from", str(old), "--to", pg_url)

    assert "never downgrade" in assert_one_line_error(result, 1)
    assert pg_rows(pg_url, "SELECT to_regclass('tasks')") == [(None,)]


# -- failures, re-runs and dry runs -------------------------------------------------------------


def test_a_failed_copy_leaves_the_target_tables_as_they_were(
    source: Source, pg_url: str, tmp_path: Path
) -> None:
    # A row PostgreSQL refuses, in a table copied after most others.
    with closing(sqlite3.connect(source.path, isolation_level=None)) as conn:
        conn.execute(
            "INSERT INTO intake_cursors (source, label, polls) VALUES ('github:x/y', 'l', 'lots')"
        )

    result = run_cli(tmp_path, "migrate-to-postgres", "--from", str(source.path), "--to", pg_url)

    line = assert_one_line_error(result, 1)
    assert "copying table 'intake_cursors' failed, so no row was copied" in line
    for table in copied_tables():
        assert pg_count(pg_url, table) == 0, f"{table} kept rows of a failed copy"

    with closing(sqlite3.connect(source.path, isolation_level=None)) as conn:
        conn.execute("UPDATE intake_cursors SET polls = 3 WHERE polls = 'lots'")
    report = db.transfer_to_postgres(source.path, pg_url)

    assert report.rows_copied == report.rows_in_source
    assert report.checkpoints_present == 3, "the checkpoints of the failed run were kept"
    for table in copied_tables():
        assert pg_count(pg_url, table) == sqlite_count(source.path, table)


def test_a_failure_in_process_names_the_table(source: Source, pg_url: str) -> None:
    with closing(sqlite3.connect(source.path, isolation_level=None)) as conn:
        conn.execute("UPDATE budget_ledger SET input_tokens = 'many' WHERE entry_id = 1")

    with pytest.raises(LedgerStorageError, match="copying table 'budget_ledger' failed"):
        db.transfer_to_postgres(source.path, pg_url)

    assert pg_count(pg_url, "pending_questions") == 0


def test_a_dry_run_writes_nothing(source: Source, pg_url: str, tmp_path: Path) -> None:
    fresh = run_cli(
        tmp_path, "migrate-to-postgres", "--from", str(source.path), "--to", pg_url, "--dry-run"
    )

    assert fresh.returncode == 0, fresh.stderr
    assert "dry run: nothing was written" in fresh.stdout
    assert "would be migrated" in fresh.stdout
    assert pg_rows(pg_url, "SELECT to_regclass('schema_meta')") == [(None,)]
    assert not (source.path.parent / "agent-team.db-daemon.lock").exists()

    db.init_db(pg_url)  # at the current schema, the dry run counts exactly (then rolls back)
    counted = db.transfer_to_postgres(source.path, pg_url, dry_run=True)

    assert counted.rows_copied == counted.rows_in_source > 0
    assert counted.checkpoints_copied == 3
    for table in copied_tables():
        assert pg_count(pg_url, table) == 0
    assert pg_rows(pg_url, "SELECT to_regclass('checkpoints')") == [(None,)]

    db.transfer_to_postgres(source.path, pg_url)
    again = db.transfer_to_postgres(source.path, pg_url, dry_run=True)
    assert again.rows_copied == 0 and again.checkpoints_copied == 0
    assert again.checkpoints_present == 3


def test_tables_larger_than_a_page_are_copied_whole(
    source: Source, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transfer, "_ROWS_PER_STATEMENT", 3)

    report = db.transfer_to_postgres(source.path, pg_url)

    assert max(t.source_rows for t in report.tables) > 3
    for table in copied_tables():
        assert pg_count(pg_url, table) == sqlite_count(source.path, table), table
    sql = "SELECT rowid, id FROM tasks ORDER BY rowid"
    assert pg_rows(pg_url, sql) == sqlite_rows(source.path, sql)


def test_the_way_back_refuses_unfinished_tasks_a_daemon_and_a_used_file(
    source: Source, pg_url: str, tmp_path: Path
) -> None:
    db.transfer_to_postgres(source.path, pg_url)
    back = tmp_path / "back" / "agent-team.db"

    unfinished = run_cli(
        tmp_path, "migrate-to-postgres", "--reverse", "--from", str(back), "--to", pg_url
    )

    line = assert_one_line_error(unfinished, 1)
    assert "4 task(s)" in line and "are not finished" in line and "cancel" in line
    assert not back.exists()

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE tasks SET status = 'cancelled'")
    with db.open_ledger(pg_url) as ledger:
        fence = db.acquire_lease(ledger, name="task:x", owner="host:1:abc", lease_s=600)
        assert fence is not None

    running = run_cli(
        tmp_path, "migrate-to-postgres", "--reverse", "--from", str(back), "--to", pg_url
    )

    assert "task:x by host:1:abc" in assert_one_line_error(running, 1)
    with db.open_ledger(pg_url) as ledger:
        assert db.release_lease(ledger, fence)

    used = run_cli(
        tmp_path, "migrate-to-postgres", "--reverse", "--from", str(source.path), "--to", pg_url
    )

    assert "already holds rows" in assert_one_line_error(used, 1)
    dry = db.transfer_to_sqlite(pg_url, back, dry_run=True)
    assert dry.rows_copied == dry.rows_in_source > 0 and not back.exists()
