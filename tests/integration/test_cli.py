"""The `agent-team` command line, run for real as the installed console script.

Each subprocess gets an empty working folder and an environment without any
`AGENT_TEAM_*` variable, so the developer's own settings and `.env` never leak
in. A few in-process `CliRunner` tests at the end cover cases that need no
process of their own.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_team import __version__, db
from agent_team.cli.main import app
from agent_team.config import ENV_PREFIX
from agent_team.exceptions import LedgerNotReadyError, SchemaTooNewError

AGENT_TEAM = Path(sys.executable).with_name("agent-team")
SECRET = "s3cr3t-value"
DAY = datetime(2026, 12, 1, tzinfo=UTC)


# --- helpers ------------------------------------------------------------------------------------


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(ENV_PREFIX)}
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CLICOLOR_FORCE"):
        env.pop(name, None)
    # Plain, wide, UTF-8 output so table rows are never wrapped or coloured.
    env.update(NO_COLOR="1", COLUMNS="200", PYTHONIOENCODING="utf-8")
    env.update(extra or {})
    return env


def run_cli(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    if not AGENT_TEAM.is_file():
        pytest.fail(f"{AGENT_TEAM} is missing; install the package: pip install -e '.[dev]'")
    return subprocess.run(
        [str(AGENT_TEAM), *args],
        cwd=cwd,
        env=_env(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The process failed with `code` and said why in exactly one line, without a traceback."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("agent-team: "), lines[0]
    return lines[0]


def cells(output: str, key: str) -> list[str]:
    """The cells of the one table row that contains `key` as a cell."""
    rows = [re.findall(r"[^\s│┃|]+", line) for line in output.splitlines()]
    matches = [row for row in rows if key in row]
    assert len(matches) == 1, (key, output)
    return matches[0]


def table_counts_from(output: str) -> dict[str, int]:
    return {table: int(cells(output, table)[1]) for table in db.LEDGER_TABLES}


def add_question(conn: db.Ledger, question_id: str, thread_id: str) -> None:
    assert db.ensure_question(
        conn,
        question_id=question_id,
        thread_id=thread_id,
        turn=1,
        kind="clarify",
        transport="local",
        deadline_at=None,
        payload_json=None,
    )


def outbox_line(**changes: object) -> str:
    """One outbox row in the documented JSONL format."""
    moment = DAY.replace(hour=10)
    row: dict[str, object] = {
        "thread_id": "t-replay",
        "stage": "plan",
        "model": "m-large",
        "billing_mode": "api",
        "input_tokens": 120,
        "output_tokens": 12,
        "usd_cost": 0.5,
        "recorded_at": db.to_iso(moment),
        "day_bucket": db.day_bucket(moment),
    }
    row.update(changes)
    return json.dumps(row, sort_keys=True) + "\n"


@pytest.fixture
def cwd_ledger(tmp_path: Path) -> Path:
    """A migrated ledger at the default path of a CLI run in `tmp_path`."""
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    return path


@pytest.fixture
def cwd_conn(cwd_ledger: Path) -> Iterator[db.Ledger]:
    connection = db.open_ledger(cwd_ledger)
    yield connection
    connection.close()


# --- --version, migrate, --db, --config ---------------------------------------------------------


def test_version(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "--version")

    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"agent-team \d+\.\d+\.\d+\S*\n", result.stdout), result.stdout
    assert result.stdout == f"agent-team {__version__}\n"
    assert not list(tmp_path.iterdir())  # no ledger created just to print a version


def test_migrate_creates_the_default_ledger_then_reports_it_current(tmp_path: Path) -> None:
    ledger = tmp_path / "agent-team.db"

    first = run_cli(tmp_path, "migrate")

    assert first.returncode == 0, first.stderr
    assert ledger.is_file()
    assert str(ledger.resolve()) in first.stdout
    assert f"v0 -> v{db.SCHEMA_VERSION}" in first.stdout
    counts = table_counts_from(first.stdout)
    assert counts == {table: 1 if table == "schema_meta" else 0 for table in db.LEDGER_TABLES}
    with closing(db.open_ledger(ledger)) as conn:
        assert db.schema_version(conn) == db.SCHEMA_VERSION

    second = run_cli(tmp_path, "migrate")

    assert second.returncode == 0, second.stderr
    assert f"v{db.SCHEMA_VERSION}, already current" in second.stdout
    assert "->" not in second.stdout
    assert table_counts_from(second.stdout) == counts


def test_db_flag_wins_over_env_and_config_and_creates_nested_folders(tmp_path: Path) -> None:
    (tmp_path / "at.toml").write_text('db_path = "from-toml.db"\n', encoding="utf-8")
    target = tmp_path / "nested" / "deeper" / "ledger.db"

    result = run_cli(
        tmp_path,
        "--db",
        "nested/deeper/ledger.db",
        "--config",
        "at.toml",
        "migrate",
        env={"AGENT_TEAM_DB_PATH": "from-env.db"},
    )

    assert result.returncode == 0, result.stderr
    assert target.is_file()
    assert str(target.resolve()) in result.stdout
    assert not (tmp_path / "from-env.db").exists()
    assert not (tmp_path / "from-toml.db").exists()
    assert not (tmp_path / "agent-team.db").exists()


def test_config_file_chooses_the_ledger(tmp_path: Path) -> None:
    (tmp_path / "at.toml").write_text('db_path = "data/from-toml.db"\n', encoding="utf-8")

    result = run_cli(tmp_path, "--config", "at.toml", "migrate")

    assert result.returncode == 0, result.stderr
    assert (tmp_path / "data" / "from-toml.db").is_file()
    assert not (tmp_path / "agent-team.db").exists()


def test_missing_config_file_exits_2(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "--config", "missing.toml", "migrate")

    line = assert_one_line_error(result, 2)
    assert "missing.toml" in line
    assert "--config" in line
    assert not (tmp_path / "agent-team.db").exists()


def test_invalid_env_value_exits_2_naming_the_variable_not_the_value(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "migrate", env={"AGENT_TEAM_LOG_LEVEL": f"loud-{SECRET}"})

    line = assert_one_line_error(result, 2)
    assert "AGENT_TEAM_LOG_LEVEL" in line
    assert all(level in line for level in ("debug", "info", "warning", "error"))
    assert SECRET not in result.stderr + result.stdout
    assert not (tmp_path / "agent-team.db").exists()


def test_migrate_refuses_a_newer_ledger_and_leaves_it_alone(tmp_path: Path) -> None:
    ledger = tmp_path / "newer.db"
    db.init_db(ledger)
    with closing(sqlite3.connect(ledger)) as raw:
        raw.execute(f"UPDATE schema_meta SET schema_version = {db.SCHEMA_VERSION + 1}")
        raw.commit()
    before = ledger.read_bytes()

    result = run_cli(tmp_path, "--db", "newer.db", "migrate")

    line = assert_one_line_error(result, 1)
    assert "upgrade agent-team" in line
    assert str(db.SCHEMA_VERSION + 1) in line
    assert ledger.read_bytes() == before
    with closing(sqlite3.connect(ledger)) as raw:
        version = raw.execute("SELECT schema_version FROM schema_meta").fetchone()
        assert version == (db.SCHEMA_VERSION + 1,)


# --- questions ----------------------------------------------------------------------------------


def test_questions_without_a_ledger_exits_1_and_creates_nothing(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "questions")

    line = assert_one_line_error(result, 1)
    assert "agent-team migrate" in line
    assert "agent-team.db" in line
    assert not list(tmp_path.iterdir())


def test_questions_lists_and_filters_by_status(tmp_path: Path, cwd_conn: db.Ledger) -> None:
    add_question(cwd_conn, "q-open-1", "t-one")
    add_question(cwd_conn, "q-done", "t-one")
    add_question(cwd_conn, "q-open-2", "t-two")
    assert db.answer_question(
        cwd_conn,
        question_id="q-done",
        answer_json='{"choice": "a"}',
        answered_via="slack",
        answered_at=DAY,
    )

    every = run_cli(tmp_path, "questions")
    only_open = run_cli(tmp_path, "questions", "--status", "open")

    assert every.returncode == 0, every.stderr
    # Oldest first, every status.
    positions = [every.stdout.index(q) for q in ("q-open-1", "q-done", "q-open-2")]
    assert positions == sorted(positions)
    assert cells(every.stdout, "q-open-1")[1:5] == ["t-one", "1", "clarify", "open"]
    done = cells(every.stdout, "q-done")
    assert done[1:5] == ["t-one", "1", "clarify", "answered"]
    # To the second, as people read it (#31, 14): the stored microseconds stay in --json.
    assert done[5:10] == ["2026-12-01", "00:00:00", "UTC", "by", "slack"]
    assert db.to_iso(DAY) not in every.stdout

    assert only_open.returncode == 0, only_open.stderr
    assert "q-open-1" in only_open.stdout
    assert "q-open-2" in only_open.stdout
    assert "q-done" not in only_open.stdout
    assert cells(only_open.stdout, "q-open-2")[1:5] == ["t-two", "1", "clarify", "open"]


def test_questions_with_an_unknown_status_exits_2(tmp_path: Path, cwd_ledger: Path) -> None:
    result = run_cli(tmp_path, "questions", "--status", "bogus")

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "--status" in result.stderr
    assert "bogus" in result.stderr
    assert "open" in result.stderr and "answered" in result.stderr
    assert result.stdout == ""


def test_questions_on_a_file_that_is_not_a_ledger_is_one_line(tmp_path: Path) -> None:
    # Regression: a --db that
    # points at a file that is not SQLite (a typo, the wrong file) escapes as a raw
    # `sqlite3.DatabaseError: file is not a database` traceback (exit 1 by accident).
    # `migrate` does the same from `db.open_ledger`. Expected: one line naming the file.
    notes = tmp_path / "notes.txt"
    notes.write_text("these are not the tables you are looking for\n", encoding="utf-8")

    result = run_cli(tmp_path, "--db", "notes.txt", "questions")

    line = assert_one_line_error(result, 1)
    assert "notes.txt" in line
    assert notes.read_text(encoding="utf-8") == "these are not the tables you are looking for\n"


# --- budget -------------------------------------------------------------------------------------


def test_budget_shows_one_utc_day_per_mode_model_and_stage(
    tmp_path: Path, cwd_conn: db.Ledger
) -> None:
    def spend(
        mode: str, model: str, stage: str, tokens: tuple[int, int], usd: float, at: datetime
    ) -> None:
        assert db.record_usage(
            cwd_conn,
            thread_id="t-1",
            stage=stage,
            model=model,
            billing_mode=mode,
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            usd_cost=usd,
            recorded_at=at,
        )

    spend("api", "m-large", "plan", (100, 10), 0.10, DAY)
    spend("api", "m-large", "plan", (200, 20), 0.25, DAY.replace(hour=12))
    spend("api", "m-large", "build", (50, 5), 0.05, DAY.replace(hour=23, minute=59, second=59))
    # 00:30 at UTC+1 on 2 December is 23:30 UTC on 1 December: it belongs to the 1st.
    plus_one = timezone(timedelta(hours=1))
    spend("api", "m-large", "build", (30, 3), 0.02, datetime(2026, 12, 2, 0, 30, tzinfo=plus_one))
    spend("subscription", "m-small", "clarify", (1000, 100), 0.0, DAY.replace(hour=8))
    # The neighbouring days must not count.
    spend("api", "m-large", "plan", (9, 9), 9.0, DAY - timedelta(microseconds=1))
    spend("api", "m-large", "plan", (9, 9), 9.0, DAY + timedelta(days=1))

    result = run_cli(tmp_path, "budget", "--day", "2026-12-01")

    assert result.returncode == 0, result.stderr
    assert "2026-12-01" in result.stdout
    assert cells(result.stdout, "plan") == ["api", "m-large", "plan", "2", "300", "30", "0.3500"]
    assert cells(result.stdout, "build") == ["api", "m-large", "build", "2", "80", "8", "0.0700"]
    assert cells(result.stdout, "clarify") == [
        "subscription",
        "m-small",
        "clarify",
        "1",
        "1000",
        "100",
        "0.0000",
    ]
    assert "total api: $0.4200" in result.stdout
    assert "total subscription: $0.0000" in result.stdout
    assert "9.0000" not in result.stdout


def test_budget_with_an_impossible_day_exits_2(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "budget", "--day", "2026-13-01")

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "2026-13-01" in result.stderr
    assert "YYYY-MM-DD" in result.stderr
    assert not (tmp_path / "agent-team.db").exists()


# --- ledger replay ------------------------------------------------------------------------------


def test_ledger_replay_restores_rows_the_ledger_refused(tmp_path: Path, cwd_ledger: Path) -> None:
    # A ledger whose budget table is gone refuses the rows, so they go to the outbox
    # beside the CLI's ledger, exactly as a failing write would put them there.
    broken = tmp_path / "broken" / "broken.db"
    db.init_db(broken)
    with closing(sqlite3.connect(broken)) as raw:
        raw.execute("DROP TABLE budget_ledger")
        raw.commit()
    outbox = cwd_ledger.parent / db.OUTBOX_FILENAME
    with closing(db.open_ledger(broken)) as broken_conn:
        for stage, usd in (("plan", 0.25), ("build", 0.5)):
            assert not db.record_usage(
                broken_conn,
                thread_id="t-1",
                stage=stage,
                model="m-large",
                billing_mode="api",
                input_tokens=10,
                output_tokens=1,
                usd_cost=usd,
                recorded_at=DAY,
                outbox=outbox,
            )
    assert len(outbox.read_text(encoding="utf-8").splitlines()) == 2

    result = run_cli(tmp_path, "ledger", "replay")

    assert result.returncode == 0, result.stderr
    assert str(outbox) in result.stdout
    assert "replayed 2, failed 0, bad lines 0, remaining 0" in result.stdout
    assert not outbox.exists()  # all of it is in the ledger: the file goes
    with closing(db.open_ledger(cwd_ledger)) as conn:
        assert db.spent(conn, day="2026-12-01", billing_mode="api") == pytest.approx(0.75)
        assert {row.stage for row in db.usage_summary(conn, day="2026-12-01")} == {"plan", "build"}


def test_ledger_replay_keeps_lines_it_cannot_write_and_exits_1(
    tmp_path: Path, cwd_ledger: Path
) -> None:
    outbox = tmp_path / "spool" / "outbox.jsonl"
    outbox.parent.mkdir()
    good = outbox_line()
    refused = outbox_line(billing_mode="bogus", thread_id="t-refused")  # fails the CHECK
    not_json = "this is not json\n"
    not_a_row = json.dumps({"thread_id": "t-partial"}) + "\n"
    outbox.write_text(good + not_json + refused + not_a_row, encoding="utf-8")

    result = run_cli(
        tmp_path, "ledger", "replay", env={"AGENT_TEAM_LEDGER_OUTBOX": "spool/outbox.jsonl"}
    )

    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "replayed 1, failed 1, bad lines 2, remaining 3" in result.stdout
    assert outbox.read_text(encoding="utf-8") == not_json + refused + not_a_row
    assert not (tmp_path / db.OUTBOX_FILENAME).exists()
    with closing(db.open_ledger(cwd_ledger)) as conn:
        summary = db.usage_summary(conn, day="2026-12-01")
    assert [(row.billing_mode, row.calls, row.input_tokens) for row in summary] == [("api", 1, 120)]


# --- schema -------------------------------------------------------------------------------------


def test_schema_prints_the_ddl(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "schema")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("-- agent-team ledger schema")
    assert f"-- schema_version {db.SCHEMA_VERSION}" in result.stdout
    assert result.stdout == db.dump_schema()
    assert not list(tmp_path.iterdir())


def test_schema_write_writes_the_file(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "schema", "--write", "out.sql")

    assert result.returncode == 0, result.stderr
    written = (tmp_path / "out.sql").read_text(encoding="utf-8")
    assert written.startswith("-- agent-team ledger schema")
    assert written == db.dump_schema()
    assert "out.sql" in result.stdout
    assert "CREATE TABLE" not in result.stdout


# --- in process (no subprocess of their own) ----------------------------------------------------


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CliRunner:
    for name in list(os.environ):
        if name.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return CliRunner()


def test_questions_none_with_a_status(runner: CliRunner, cwd_conn: db.Ledger) -> None:
    add_question(cwd_conn, "q-open", "t-one")

    result = runner.invoke(app, ["questions", "--status", "expired"])

    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "no questions with status expired"


def test_questions_filters_by_task(runner: CliRunner, cwd_conn: db.Ledger) -> None:
    add_question(cwd_conn, "q-a", "t-one")
    add_question(cwd_conn, "q-b", "t-two")

    result = runner.invoke(app, ["questions", "--task", "t-two"])

    assert result.exit_code == 0, result.output
    assert "q-b" in result.stdout
    assert "q-a" not in result.stdout


def test_budget_with_no_rows_says_so(runner: CliRunner, cwd_ledger: Path) -> None:
    result = runner.invoke(app, ["budget", "--day", "2026-11-30"])

    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "no model calls recorded on 2026-11-30"


def test_replay_outbox_flag_wins_over_the_setting(
    runner: CliRunner, tmp_path: Path, cwd_ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_setting = tmp_path / "from-setting.jsonl"
    from_flag = tmp_path / "from-flag.jsonl"
    from_setting.write_text(outbox_line(stage="setting"), encoding="utf-8")
    from_flag.write_text(outbox_line(stage="flag"), encoding="utf-8")
    monkeypatch.setenv("AGENT_TEAM_LEDGER_OUTBOX", str(from_setting))

    result = runner.invoke(app, ["ledger", "replay", "--outbox", str(from_flag)])

    assert result.exit_code == 0, result.output
    assert not from_flag.exists()
    assert from_setting.read_text(encoding="utf-8") == outbox_line(stage="setting")
    with closing(db.open_ledger(cwd_ledger)) as conn:
        assert [row.stage for row in db.usage_summary(conn, day="2026-12-01")] == ["flag"]


def test_replay_with_no_outbox_is_a_no_op(runner: CliRunner, cwd_ledger: Path) -> None:
    result = runner.invoke(app, ["ledger", "replay"])

    assert result.exit_code == 0, result.output
    assert "replayed 0, failed 0, bad lines 0, remaining 0" in result.stdout


def test_reading_commands_refuse_an_old_ledger(runner: CliRunner, tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    with closing(db.open_ledger(old)) as conn:
        db.migrate(conn, target=3)

    result = runner.invoke(app, ["--db", str(old), "questions"])

    assert isinstance(result.exception, LedgerNotReadyError)
    assert "agent-team migrate" in str(result.exception)
    with closing(db.open_ledger(old)) as conn:
        assert db.schema_version(conn) == 3


def test_reading_commands_refuse_a_newer_ledger(runner: CliRunner, tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    db.init_db(newer)
    with closing(sqlite3.connect(newer)) as raw:
        raw.execute(f"UPDATE schema_meta SET schema_version = {db.SCHEMA_VERSION + 1}")
        raw.commit()

    result = runner.invoke(app, ["--db", str(newer), "budget", "--day", "2026-12-01"])

    assert isinstance(result.exception, SchemaTooNewError)
    assert "upgrade agent-team" in str(result.exception)
    assert "newer.db" in str(result.exception)


def test_migrate_names_the_newer_ledger_it_refuses(runner: CliRunner, tmp_path: Path) -> None:
    # Regression: it calls `_refuse_newer(current, "")`, so
    # `agent-team migrate` says "the ledger  is at schema version 7" (double space, no
    # file) where `assert_ready` says "the ledger at <file> is at ...".
    newer = tmp_path / "newer.db"
    db.init_db(newer)
    with closing(sqlite3.connect(newer)) as raw:
        raw.execute(f"UPDATE schema_meta SET schema_version = {db.SCHEMA_VERSION + 1}")
        raw.commit()

    result = runner.invoke(app, ["--db", str(newer), "migrate"])

    assert isinstance(result.exception, SchemaTooNewError)
    assert "newer.db" in str(result.exception)
    assert "  " not in str(result.exception)


def _open_plan_question(conn: db.Ledger, task_id: str = "t-plan") -> str:
    db.create_task(conn, task_id=task_id, kind="code", title="Plan me", body="")
    question_id = f"{task_id}:q1"
    db.ensure_question(
        conn,
        question_id=question_id,
        thread_id=task_id,
        turn=1,
        kind="plan_decision",
        transport="local",
        deadline_at=None,
        payload_json=json.dumps({"text": "Approve the plan?"}),
    )
    return question_id


def test_answer_takes_the_rest_of_the_line_unquoted(runner: CliRunner, cwd_conn: db.Ledger) -> None:
    question_id = _open_plan_question(cwd_conn)

    result = runner.invoke(
        app, ["answer", question_id, "revise", "please", "add", "X", "--as", "ann"]
    )

    assert result.exit_code == 0, result.output
    stored = db.get_question(cwd_conn, question_id)
    assert stored is not None and stored.status == "answered"
    assert stored.answer == {"decision": "revise", "text": "please add X"}
    assert stored.answered_via == "cli:ann"


def test_answer_quoted_is_the_same_answer(runner: CliRunner, cwd_conn: db.Ledger) -> None:
    question_id = _open_plan_question(cwd_conn)

    result = runner.invoke(app, ["answer", question_id, "revise please add X"])

    assert result.exit_code == 0, result.output
    stored = db.get_question(cwd_conn, question_id)
    assert stored is not None and stored.answer == {"decision": "revise", "text": "please add X"}


def test_answer_without_text_is_refused_and_stores_nothing(
    runner: CliRunner, cwd_conn: db.Ledger
) -> None:
    question_id = _open_plan_question(cwd_conn)

    result = runner.invoke(app, ["answer", question_id])

    assert result.exit_code == 2
    stored = db.get_question(cwd_conn, question_id)
    assert stored is not None and stored.status == "open"


DETAILED_BODY = (
    "The login page should remember the user's email address between visits.\n"
    "- Store the email in a cookie after a successful login\n"
    "- Prefill the email field when the cookie is present\n"
    "- Add a test that covers both paths\n"
)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _run_to_the_gate(runner: CliRunner, title: str, body: str) -> str:
    submitted = runner.invoke(app, ["submit", "--title", title, "--body", body])
    assert submitted.exit_code == 0, submitted.output
    ticked = runner.invoke(app, ["tick", "--until-idle", "--timeout", "60"])
    assert ticked.exit_code == 0, ticked.output
    return submitted.stdout.strip()


def test_show_and_open_questions_print_the_plan_under_review(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TEAM_STATE_DIR", str(tmp_path / "state"))
    task_id = _run_to_the_gate(runner, "Remember the email", DETAILED_BODY)
    with db.open_ledger(tmp_path / "agent-team.db") as ledger:
        (asked,) = db.list_questions(ledger, status="open", thread_id=task_id)
    plan = asked.payload["plan_markdown"]
    assert asked.kind == "plan_decision" and plan.strip()

    listed = runner.invoke(app, ["questions", "--status", "open"])
    one = runner.invoke(app, ["questions", asked.question_id])
    every = runner.invoke(app, ["questions", "--status", "open", "--plans"])
    shown = runner.invoke(app, ["show", task_id])

    for result in (listed, one, every, shown):
        assert result.exit_code == 0, result.output
    # #31 (10): the list is a table; the plan is printed for one question or with --plans.
    assert _flat(plan) not in _flat(listed.stdout)
    assert f"`agent-team questions {asked.question_id}` prints one in full" in listed.stdout
    assert _flat(plan) in _flat(one.stdout)
    assert _flat(plan) in _flat(every.stdout)
    assert _flat(plan) in _flat(shown.stdout)
    assert f"the plan ({asked.question_id}, open)" in shown.stdout


def test_show_prints_the_clarify_question_and_its_answer(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TEAM_STATE_DIR", str(tmp_path / "state"))
    task_id = _run_to_the_gate(runner, "Login", "Make login nicer.")
    with db.open_ledger(tmp_path / "agent-team.db") as ledger:
        (asked,) = db.list_questions(ledger, status="open", thread_id=task_id)
    assert asked.kind == "clarify"
    reply = "Remember the email in a cookie and prefill it next time"
    answered = runner.invoke(app, ["answer", asked.question_id, reply])
    assert answered.exit_code == 0, answered.output

    shown = runner.invoke(app, ["show", task_id])

    assert shown.exit_code == 0, shown.output
    assert _flat(f"clarify {asked.question_id}: {asked.payload['text']}") in _flat(shown.stdout)
    assert f"answer: {reply}" in shown.stdout


def _steps_table(output: str) -> list[list[str]]:
    """The rows of `show`'s steps table: (number, step, outcome...) cells split on the borders."""
    table = output[output.index("steps") : output.index("questions")]
    rows = [
        [cell.strip() for cell in line.strip("│").split("│")]
        for line in table.splitlines()
        if line.startswith("│")
    ]
    return [row for row in rows if row and row[0].isdigit()]


def test_show_lists_each_steps_own_outcome_and_the_plan_diff_after_a_revise(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TEAM_STATE_DIR", str(tmp_path / "state"))
    task_id = _run_to_the_gate(runner, "Remember the email", DETAILED_BODY)
    revised = runner.invoke(app, ["answer", f"{task_id}:q1", "--as", "ada", "revise", "log it"])
    assert revised.exit_code == 0, revised.output
    assert runner.invoke(app, ["tick", "--until-idle", "--timeout", "60"]).exit_code == 0

    waiting = runner.invoke(app, ["show", task_id])

    assert waiting.exit_code == 0, waiting.output
    steps = _steps_table(waiting.stdout)
    assert [(row[1], row[2].split(" ")[0]) for row in steps] == [
        ("intake", "done"),
        ("clarify", "done"),
        ("plan", "done"),
        ("plan_review", "waited"),
        ("plan", "done"),
        ("plan_review", "waiting"),
    ]
    assert re.fullmatch(r"waited .+ · answered by ada via cli: revise", steps[3][2])
    assert "so far" in steps[5][4]  # only the open step is still counting
    # The new plan against the one ada asked to revise: the feedback step is the change.
    assert "changed since plan 1 (revise by ada via cli: log it):" in waiting.stdout
    assert "+ 4. Address review feedback: log it" in waiting.stdout

    approved = runner.invoke(app, ["answer", f"{task_id}:q2", "--as", "bob", "approve"])
    assert approved.exit_code == 0, approved.output
    assert runner.invoke(app, ["tick", "--until-idle", "--timeout", "60"]).exit_code == 0
    done = runner.invoke(app, ["show", task_id])
    as_json = runner.invoke(app, ["show", task_id, "--json"])

    steps = _steps_table(done.stdout)
    outcomes = [row[2] for row in steps]
    assert [row[1] for row in steps] == [
        "intake",
        "clarify",
        "plan",
        "plan_review",
        "plan",
        "plan_review",
        "build",
        "done",
    ]
    assert not any("running" in outcome for outcome in outcomes), outcomes
    assert re.fullmatch(r"waited .+ · answered by bob via cli: approve", outcomes[5])
    assert outcomes[6] == "done" and outcomes[7] == "done"
    report = json.loads(as_json.stdout)
    assert [s["outcome"] for s in report["steps"]] == [
        "done",
        "done",
        "done",
        "answered",
        "done",
        "answered",
        "done",
        "done",
    ]
    assert len(report["transitions"]) > len(report["steps"])  # the gates' rows are folded
    first, second = report["plans"]
    assert (first["decision"], first["feedback"], second["base"]) == ("revise", "log it", 1)
    assert {"op": "+", "text": "4. Address review feedback: log it"} in second["diff"]


def test_questions_show_deadlines_as_people_read_them(
    runner: CliRunner, cwd_conn: db.Ledger
) -> None:
    due = datetime.now(UTC) + timedelta(days=3, minutes=30)
    db.create_task(cwd_conn, task_id="t-due", kind="code", title="Due", body="")
    db.ensure_question(
        cwd_conn,
        question_id="t-due:q1",
        thread_id="t-due",
        turn=1,
        kind="clarify",
        transport="local",
        deadline_at=due,
        payload_json=json.dumps({"text": "When?"}),
    )

    result = runner.invoke(app, ["questions", "--status", "open"])

    assert result.exit_code == 0, result.output
    assert f"in 3d 0h ({due:%a %H:%M} UTC)" in result.stdout
    assert db.to_iso(due) not in result.stdout  # the raw stamp stays in --json


def test_a_read_in_a_folder_without_the_ledger_points_to_db_and_creates_nothing(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(app, ["tasks"])

    assert isinstance(result.exception, LedgerNotReadyError)
    message = str(result.exception)
    assert str(tmp_path / "agent-team.db") in message  # the path it looked at, in full
    assert "--db PATH" in message and "AGENT_TEAM_DB_PATH" in message
    assert not (tmp_path / "agent-team.db").exists()


PR_URL = "https://github.com/acme/app/pull/12"


def _pr_question(conn: db.Ledger, kind: str, payload: dict[str, object]) -> str:
    """t-pr, waiting in `pr_open` on one open question of `kind`, as the PR nodes ask it."""
    db.create_task(conn, task_id="t-pr", kind="code", title="Remember the email", body="")
    db.ensure_question(
        conn,
        question_id="t-pr:q3",
        thread_id="t-pr",
        turn=3,
        kind=kind,
        transport="local",
        deadline_at=datetime.now(UTC) + timedelta(hours=72) if kind == "pr_decision" else None,
        payload_json=json.dumps({"title": "Remember the email", "url": PR_URL, **payload}),
    )
    return "t-pr:q3"


def test_the_pr_gate_is_listed_as_waiting_on_github_and_cannot_be_answered(
    runner: CliRunner, cwd_conn: db.Ledger
) -> None:
    text = f"Draft pull request #12 is open: {PR_URL}"
    question_id = _pr_question(cwd_conn, "pull_request", {"text": text, "number": 12})

    listed = runner.invoke(app, ["questions", "--status", "open"])
    answered = runner.invoke(app, ["answer", question_id, "merged"])

    assert listed.exit_code == 0, listed.output
    assert f"waiting on GitHub: {PR_URL}" in _flat(listed.stdout)
    assert answered.exit_code == 1
    message = str(answered.exception)
    assert f"waits on GitHub ({PR_URL})" in message
    assert "`agent-team cancel t-pr`" in message and "nothing was stored" in message
    stored = db.get_question(cwd_conn, question_id)
    assert stored is not None and (stored.status, stored.answer_json) == ("open", None)


def test_an_open_pr_decision_shows_its_check_and_choices_and_takes_take_over(
    runner: CliRunner, cwd_conn: db.Ledger
) -> None:
    question_id = _pr_question(
        cwd_conn,
        "pr_decision",
        {
            "text": "CI is red on the pull request's head: lint. What should the agent do?",
            "reason": "ci_failed",
            "checks": [
                {
                    "name": "lint",
                    "conclusion": "failure",
                    "url": "https://github.com/acme/app/actions/runs/9",
                    "excerpt": "\n".join(f"line {n}" for n in range(1, 21)),
                }
            ],
            "items": [{"user": "reviewer", "body": "Name the\ntest file."}],
        },
    )

    listed = runner.invoke(app, ["questions", question_id])

    assert listed.exit_code == 0, listed.output
    shown = listed.stdout[listed.stdout.index(f"the pull request {question_id} needs") :]
    assert shown.splitlines()[:5] == [
        f"the pull request {question_id} needs a decision (ci_failed):",
        "  CI is red on the pull request's head: lint. What should the agent do?",
        "  failing check lint (failure, log https://github.com/acme/app/actions/runs/9)",
        "    | line 1",
        "    | line 2",
    ]
    assert "    | line 15\n    | … 5 more lines\n" in shown
    assert "  review by reviewer: Name the test file.\n" in shown
    assert f"answer {question_id} fix [note] | ignore | take over" in shown

    taken = runner.invoke(app, ["answer", question_id, "take", "over", "--as", "ann"])

    assert taken.exit_code == 0, taken.output
    stored = db.get_question(cwd_conn, question_id)
    assert stored is not None and stored.answer == {"decision": "takeover", "text": ""}
