"""`agent-team automation`, `audit` and `inbox`, run as the installed console script."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_team import db
from tests.integration.test_cli import assert_one_line_error, run_cli

BODY = "Look at the open dependency bumps and merge the safe ones, with a test run for each."
ADD = ("automation", "add", "bumps", "--title", "Review bumps", "--body", BODY)


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    return path


def cli(
    tmp_path: Path, ledger_path: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return run_cli(tmp_path, *args, env={"AGENT_TEAM_DB_PATH": str(ledger_path), **env})


def counts(path: Path) -> tuple[int, int]:
    with db.open_ledger(path) as ledger:
        automations = len(db.list_automations(ledger)) + len(
            db.list_automations(ledger, status="cancelled")
        )
        return automations, len(db.list_audit(ledger, limit=1000))


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (("--every", "5x"), "every"),
        (("--every", "30s"), "every"),
        (("--cron", "61 9 * * MON"), "cron"),
        (("--cron", "0 9 * * MON", "--tz", "Mars/Olympus"), "timezone"),
        (("--every", "1h", "--cron", "0 9 * * *"), "schedule"),
        ((), "schedule"),
        (("--once",), "first_run_at"),
        (("--once", "--first-run-at", "tomorrow"), "first_run_at"),
        (("--every", "1h", "--overlap", "sometimes"), "overlap"),
        (("--every", "1h", "--kind", "poem"), "kind"),
        (("--every", "1h", "--kind", "confluence"), "kind"),
        (("--every", "1h", "--repo", "not a repo"), "repo"),
    ],
)
def test_bad_input_is_one_line_naming_the_field_exit_2_and_nothing_stored(
    tmp_path: Path, ledger_path: Path, extra: tuple[str, ...], field: str
) -> None:
    result = cli(tmp_path, ledger_path, *ADD, *extra)

    line = assert_one_line_error(result, 2)
    assert line.startswith(f"agent-team: {field}: "), line
    assert counts(ledger_path) == (0, 0)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("automation", "add", "bumps", "--title", "T", "--body", "  ", "--every", "1h"), "body"),
        (
            ("automation", "add", "bad/name", "--title", "T", "--body", BODY, "--every", "1h"),
            "name",
        ),
        (("automation", "add", "x" * 81, "--title", "T", "--body", BODY, "--every", "1h"), "name"),
        (
            ("automation", "add", "ok", "--title", "T" * 301, "--body", BODY, "--every", "1h"),
            "title",
        ),
    ],
)
def test_bad_names_titles_and_bodies(
    tmp_path: Path, ledger_path: Path, args: tuple[str, ...], field: str
) -> None:
    line = assert_one_line_error(cli(tmp_path, ledger_path, *args), 2)
    assert line.startswith(f"agent-team: {field}: "), line
    assert counts(ledger_path) == (0, 0)


def test_a_duplicate_active_name_is_refused_and_a_cancelled_one_frees_it(
    tmp_path: Path, ledger_path: Path
) -> None:
    assert cli(tmp_path, ledger_path, *ADD, "--every", "1h").returncode == 0
    again = cli(tmp_path, ledger_path, *ADD, "--every", "2h")
    assert "name: an automation named 'bumps' exists" in assert_one_line_error(again, 2)
    assert counts(ledger_path) == (1, 1)
    assert cli(tmp_path, ledger_path, "automation", "cancel", "bumps").returncode == 0
    assert cli(tmp_path, ledger_path, *ADD, "--every", "2h").returncode == 0
    assert counts(ledger_path) == (2, 3)


def test_the_whole_life_of_an_automation_each_change_audited_once(
    tmp_path: Path, ledger_path: Path
) -> None:
    steps = [
        (*ADD, "--cron", "0 9 * * MON", "--tz", "Europe/Berlin"),
        ("automation", "update", "bumps", "--every", "1d", "--title", "Review the bumps"),
        ("automation", "pause", "bumps"),
        ("automation", "resume", "bumps"),
        ("automation", "run-now", "bumps"),
        ("automation", "cancel", "bumps"),
    ]
    for step in steps:
        result = cli(tmp_path, ledger_path, *step)
        assert result.returncode == 0, (step, result.stderr)

    shown = cli(tmp_path, ledger_path, "automation", "show", "bumps", "--json")
    found = json.loads(shown.stdout)
    assert (found["status"], found["title"], found["schedule"]) == (
        "cancelled",
        "Review the bumps",
        "every 1d",
    )
    (run,) = found["runs"]
    assert (run["status"], run["manual"], run["task_status"]) == ("created", 1, "queued")

    audit = json.loads(cli(tmp_path, ledger_path, "audit", "--json").stdout)
    assert [row["action"] for row in reversed(audit)] == [
        "automation.create",
        "automation.update",
        "automation.pause",
        "automation.resume",
        "automation.run_now",
        "submit",
        "automation.run.created",
        "automation.cancel",
    ]
    assert {row["via"] for row in audit} == {"cli", "automation"}
    only = json.loads(
        cli(tmp_path, ledger_path, "audit", "--action", "automation.p", "--json").stdout
    )
    assert [row["action"] for row in only] == ["automation.pause"]
    verified = cli(tmp_path, ledger_path, "audit", "verify")
    assert verified.returncode == 0 and "8 row(s)" in verified.stdout

    with db.open_ledger(ledger_path) as ledger:
        third = sorted(row.seq for row in db.list_audit(ledger))[2]
        ledger.write(
            lambda tx: tx.execute("UPDATE audit_log SET actor = 'mallory' WHERE seq = ?", (third,))
        )
    broken = cli(tmp_path, ledger_path, "audit", "verify")
    assert broken.returncode == 1
    assert f"BROKEN at row {third}" in broken.stdout


def test_operator_actions_on_tasks_are_audited_once_each(tmp_path: Path, ledger_path: Path) -> None:
    submitted = cli(tmp_path, ledger_path, "submit", "--title", "Fix it", "--body", BODY)
    task_id = submitted.stdout.strip()
    with db.open_ledger(ledger_path) as ledger:
        for turn, status in ((1, "expired"), (2, "open")):
            assert db.ensure_question(
                ledger,
                question_id=f"{task_id}:q{turn}",
                thread_id=task_id,
                turn=turn,
                kind="plan_decision",
                transport="local",
                deadline_at=db.utc_now() + timedelta(hours=1),
                payload_json=None,
            )
            if status == "expired":
                assert db.expire_question(ledger, question_id=f"{task_id}:q1")
        db.set_task_status(ledger, task_id, "parked", parked_reason="builder_unavailable")
    steps = [
        ("answer", f"{task_id}:q2", "approve", "--as", "ada"),
        ("retry", task_id),
        ("reopen", f"{task_id}:q1"),
        ("cancel", task_id),
    ]
    for step in steps:
        result = cli(tmp_path, ledger_path, *step)
        assert result.returncode == 0, (step, result.stderr)
    audit = json.loads(cli(tmp_path, ledger_path, "audit", "--json").stdout)
    assert [(r["action"], r["target"], r["via"]) for r in reversed(audit)] == [
        ("submit", task_id, "cli"),
        ("answer", f"{task_id}:q2", "cli"),
        ("retry", task_id, "cli"),
        ("reopen", f"{task_id}:q1", "cli"),
        ("cancel", task_id, "cli"),
    ]
    answer = next(r for r in audit if r["action"] == "answer")
    assert answer["actor"] == "ada" and answer["detail"]["decision"] == "approve"
    # A refused action (the task is no longer parked) is not audited.
    refused = cli(tmp_path, ledger_path, "retry", task_id)
    assert refused.returncode == 1
    assert len(json.loads(cli(tmp_path, ledger_path, "audit", "--json").stdout)) == 5


def test_audit_filters_are_checked(tmp_path: Path, ledger_path: Path) -> None:
    result = cli(tmp_path, ledger_path, "audit", "--since", "a while")
    assert result.returncode == 2 and "--since" in result.stderr
    assert cli(tmp_path, ledger_path, "audit", "--limit", "0").returncode == 2
    empty = cli(tmp_path, ledger_path, "audit")
    assert empty.returncode == 0 and "no audit rows" in empty.stdout


def test_a_one_off_added_in_the_past_shows_overdue_runs_at_the_next_tick_and_is_audited(
    tmp_path: Path, ledger_path: Path
) -> None:
    once_at = (datetime.now(UTC) - timedelta(hours=2)).replace(microsecond=0)
    added = cli(tmp_path, ledger_path, *ADD, "--once", "--first-run-at", once_at.isoformat())
    assert added.returncode == 0, added.stderr
    assert "active; next run " + once_at.strftime("%Y-%m-%d %H:%M") in added.stdout

    inbox = json.loads(cli(tmp_path, ledger_path, "inbox", "--json").stdout)
    assert [(i["kind"], i["title"], i["detail"][:7]) for i in inbox] == [
        ("automation", "bumps", "overdue")
    ]
    assert cli(tmp_path, ledger_path, "tick").returncode == 0
    after = json.loads(cli(tmp_path, ledger_path, "inbox", "--json").stdout)
    assert [i["kind"] for i in after] == ["question"], "run: its task waits on its plan"
    found = json.loads(cli(tmp_path, ledger_path, "automation", "show", "bumps", "--json").stdout)
    (run,) = found["runs"]
    assert (run["slot_at"], run["status"], found["next_run_at"]) == (
        db.to_iso(once_at),
        "created",
        None,
    )

    again = cli(tmp_path, ledger_path, "automation", "run-now", "bumps")
    assert again.returncode == 0, again.stderr
    assert f"skipped_overlap: the previous run's task {run['task_id']} is still open" in (
        again.stdout
    )
    audit = json.loads(
        cli(tmp_path, ledger_path, "audit", "--action", "automation.run", "--json").stdout
    )
    assert [(r["action"], r["via"]) for r in reversed(audit)] == [
        ("automation.run.created", "automation"),
        ("automation.run_now", "cli"),
        ("automation.run.skipped_overlap", "automation"),
    ]
    assert audit[0]["actor"] == audit[2]["actor"] == "bumps"
    assert cli(tmp_path, ledger_path, "audit", "verify").returncode == 0
