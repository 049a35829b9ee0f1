"""What the command line prints for a person (#31): the plan that was built after an `edit`,
answers as they were written, times to the second, a task that nothing runs, the inbox's
commands as this shell runs them, `--help` in groups, and exit 2 for every bad input.

Most run the installed console script (`run_cli`), as a person would; the pipeline ones
run in process (`CliRunner`), which needs no process per step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_team import db
from agent_team.cli.main import app
from agent_team.models.schemas import Plan
from agent_team.reports.presence import NO_DAEMON, daemon_presence
from agent_team.requests.actors import cli_actor
from tests.integration.test_cli import (
    AGENT_TEAM,
    DETAILED_BODY,
    _run_to_the_gate,
    assert_one_line_error,
    run_cli,
)

MICROSECONDS = re.compile(r"\d\d:\d\d:\d\d\.\d{6}")
EDITED = """# Plan

Greet new readers.

## Steps

1. Add the greeting line under the title
2. Add a test that checks it

## Risks

- None
"""


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch, isolated_env: Path) -> CliRunner:
    monkeypatch.setenv("AGENT_TEAM_STATE_DIR", str(isolated_env / "state"))
    return CliRunner()


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[db.Ledger]:
    """A migrated ledger where a CLI run in `tmp_path` finds it."""
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    with db.open_ledger(path) as conn:
        yield conn


def squash(text: str) -> str:
    """The text without white space and table borders, so a folded cell reads whole."""
    return re.sub(r"[\s│┃|]", "", text)


def clarify_question(conn: db.Ledger, task_id: str = "t-one") -> str:
    db.create_task(conn, task_id=task_id, kind="code", title="Remember the email", body="")
    question_id = f"{task_id}:q1"
    db.ensure_question(
        conn,
        question_id=question_id,
        thread_id=task_id,
        turn=1,
        kind="clarify",
        transport="local",
        deadline_at=datetime.now(UTC) + timedelta(hours=24),
        payload_json=json.dumps({"text": "Which page?"}),
    )
    return question_id


# --- 1: the plan that was built ---------------------------------------------------------


def test_after_an_edit_show_and_its_json_give_the_edited_plan(runner: CliRunner) -> None:
    task_id = _run_to_the_gate(runner, "Remember the email", DETAILED_BODY)
    edited = runner.invoke(app, ["answer", f"{task_id}:q1", "edit", EDITED])
    assert edited.exit_code == 0, edited.output
    assert runner.invoke(app, ["tick", "--until-idle", "--timeout", "60"]).exit_code == 0

    shown = runner.invoke(app, ["show", task_id])
    as_json = runner.invoke(app, ["show", task_id, "--json"])

    assert shown.exit_code == 0 and as_json.exit_code == 0, shown.output + as_json.output
    built = Plan.from_text(EDITED).to_markdown()
    current = shown.stdout[shown.stdout.index("the plan (") :]
    me = cli_actor().name
    assert current.startswith(f"the plan (edited by {me} via cli in {task_id}:q1):")
    assert built.strip() in current
    assert "Store the email in a cookie" not in current.split("changed since")[0]
    assert "+ 1. Add the greeting line under the title" in current  # against the model's
    plans = json.loads(as_json.stdout)["plans"]
    assert [(p["number"], p["source"]) for p in plans] == [(1, "model"), (2, "edit")]
    assert plans[-1]["markdown"] == built
    assert plans[0]["decision"] == "edit" and plans[0]["feedback"] is None


# --- 14: answers, times, deadlines, a cancelled task ---------------------------------------


@pytest.mark.slow
def test_answers_read_as_written_and_times_to_the_second(tmp_path: Path, ledger: db.Ledger) -> None:
    question_id = clarify_question(ledger)

    answered = run_cli(tmp_path, "answer", question_id, "ok \N{GRINNING FACE}")
    shown = run_cli(tmp_path, "show", "t-one")
    listed = run_cli(tmp_path, "questions")
    as_json = run_cli(tmp_path, "questions", "--json")

    assert answered.returncode == 0, answered.stderr
    assert answered.stdout == f"answered {question_id}: ok \N{GRINNING FACE}\n"
    assert "\\ud83d" not in shown.stdout and "\N{GRINNING FACE}" in shown.stdout
    for result in (shown, listed):
        assert result.returncode == 0, result.stderr
        assert not MICROSECONDS.search(result.stdout), result.stdout
        # Answered: no deadline is shown any more (`--json` keeps it).
        assert " UTC)" not in result.stdout and "in 23h" not in result.stdout
    assert "\N{GRINNING FACE}" in as_json.stdout and MICROSECONDS.search(as_json.stdout)
    (stored,) = json.loads(as_json.stdout)
    assert stored["deadline_at"] is not None


def test_a_cancelled_task_says_where_it_stopped(runner: CliRunner) -> None:
    task_id = _run_to_the_gate(runner, "Remember the email", DETAILED_BODY)
    assert runner.invoke(app, ["cancel", task_id]).exit_code == 0
    assert runner.invoke(app, ["tick", "--until-idle", "--timeout", "60"]).exit_code == 0

    shown = runner.invoke(app, ["show", task_id])

    assert shown.exit_code == 0, shown.output
    assert "status cancelled, stopped in plan_review" in shown.stdout
    assert "phase done" not in shown.stdout
    listed = runner.invoke(app, ["tasks"])
    (row,) = [line for line in listed.stdout.splitlines() if task_id in line]
    assert "stopped in plan_review" in row and " done " not in row


# --- 5: a task nothing runs ----------------------------------------------------------------


@pytest.mark.slow
def test_show_says_when_no_daemon_runs_the_ledger(tmp_path: Path, ledger: db.Ledger) -> None:
    submitted = run_cli(tmp_path, "submit", "--title", "Remember the email")
    task_id = submitted.stdout.strip()

    alone = run_cli(tmp_path, "show", task_id)
    lock = db.claim_daemon_slot(tmp_path / "agent-team.db", url="http://127.0.0.1:9/")
    try:
        served = run_cli(tmp_path, "show", task_id)
    finally:
        lock.release()

    assert alone.returncode == 0 and served.returncode == 0, alone.stderr + served.stderr
    said = NO_DAEMON.replace("`agent-team", f"`{AGENT_TEAM}")
    assert said in alone.stdout or NO_DAEMON in alone.stdout, alone.stdout
    assert "no daemon is running" not in served.stdout


def test_without_a_lock_file_the_loop_leases_say_whether_a_daemon_runs(ledger: db.Ledger) -> None:
    # On PostgreSQL daemons take no lock file: their loop leases say they are there.
    url = "postgresql://db.example/agent_team"
    now = datetime.now(UTC)
    assert daemon_presence(ledger, url, now).running is False
    db.acquire_lease(ledger, name="loop:timers", owner="host:1:2", lease_s=35)
    assert daemon_presence(ledger, url, now).running is True
    assert daemon_presence(ledger, url, now + timedelta(minutes=5)).running is False


def test_a_daemon_beating_counts_though_its_loops_are_between_passes(ledger: db.Ledger) -> None:
    # A long timers pass lets the loop lease lapse; the daemon's own heartbeat still says so.
    url = "postgresql://db.example/agent_team"
    now = datetime.now(UTC)
    started = db.DaemonStart("host:7:8", "host", 7, "1.0", None, 30.0, now)
    db.register_daemon(ledger, started, now=now)
    assert daemon_presence(ledger, url, now + timedelta(seconds=20)).running is True
    assert daemon_presence(ledger, url, now + timedelta(seconds=40)).running is False


# --- 11: the inbox's commands ----------------------------------------------------------------


def test_the_inbox_names_the_command_as_this_shell_runs_it(
    tmp_path: Path, ledger: db.Ledger
) -> None:
    db.create_task(ledger, task_id="t-failed", kind="code", title="Broke", body="")
    db.finish_task(ledger, task_id="t-failed", status="failed", phase=None, note="BuildError")

    # Not on PATH: the command is the script's own path, as everywhere else in the CLI.
    result = run_cli(tmp_path, "inbox", env={"PATH": "/usr/bin:/bin"})

    assert result.returncode == 0, result.stderr
    text = squash(result.stdout)
    assert squash(f"{AGENT_TEAM} show t-failed") in text
    assert squash(f"{AGENT_TEAM} retry t-failed") in text
    assert "why:agent-teamshow" not in text


# --- 14: --help ------------------------------------------------------------------------------


def test_help_groups_the_commands_and_shows_no_bool_after_flags(tmp_path: Path) -> None:
    top = run_cli(tmp_path, "--help", env={"COLUMNS": "80"})
    tasks = run_cli(tmp_path, "tasks", "--help", env={"COLUMNS": "80"})

    assert top.returncode == 0 and tasks.returncode == 0, top.stderr + tasks.stderr
    for result in (top, tasks):
        assert "<bool>" not in result.stdout
    panels = [top.stdout.index(f"╭─ {name} ") for name in ("Tasks", "Running", "The ledger")]
    assert panels == sorted(panels)
    assert top.stdout.index("│ submit") < top.stdout.index("│ migrate ")
    # The statuses in words that wrap whole, not a type column cut mid-word.
    assert "parked," in tasks.stdout and "parke\n" not in tasks.stdout.replace("│", "\n")


# --- 14: exit codes --------------------------------------------------------------------------


@pytest.mark.slow
def test_bad_input_exits_2_in_every_command(tmp_path: Path, ledger: db.Ledger) -> None:
    question_id = clarify_question(ledger)
    db.ensure_question(
        ledger,
        question_id="t-one:q2",
        thread_id="t-one",
        turn=2,
        kind="plan_decision",
        transport="local",
        deadline_at=None,
        payload_json="{}",
    )

    ours = [
        run_cli(tmp_path, "answer", "t-one:q2", "maybe later"),  # outside the grammar
        run_cli(tmp_path, "answer", question_id, "   "),  # empty
        run_cli(tmp_path, "show", "t-nope"),  # an id that names nothing
        run_cli(tmp_path, "questions", "t-nope:q1"),
        run_cli(tmp_path, "note", "t-nope", "hello"),
        run_cli(tmp_path, "note", "t-one", " "),
        run_cli(tmp_path, "submit", "--title", "x" * 400),  # over the limit
    ]
    typers = run_cli(tmp_path, "tasks", "--status", "sleeping")  # its usage error: 2 already

    for result in ours:
        assert_one_line_error(result, 2)
    assert typers.returncode == 2, typers.stderr
    (open_q, plan_q) = db.list_questions(ledger, thread_id="t-one")
    assert open_q.status == "open" and plan_q.status == "open"  # nothing was stored
    assert [t.id for t in db.list_tasks(ledger)] == ["t-one"]
