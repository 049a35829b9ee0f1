"""One size limit for a task, whichever way it comes in (issue: a 5 MB CLI body the API refused).

The CLI, the dashboard API, GitHub intake and (later) automations all submit
through `inbox.submit_task`, so the limit is enforced there and each entry
point only decides how to say no: a one-line CLI error, a 413 naming the
limit, or (for a GitHub issue, which cannot be refused) a cut body with a
note. A ledger written before the limit still renders a bounded page.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, create_app
from agent_team.exceptions import TaskTooLargeError
from agent_team.integrations.github.intake import GitHubIssue
from agent_team.requests import inbox
from agent_team.requests.limits import MAX_BODY_CHARS, MAX_TITLE_CHARS, PAGE_BODY_CHARS
from tests.integration.dashboard.conftest import TOKEN, make_settings
from tests.integration.test_cli import assert_one_line_error, run_cli


def _task_count(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        (count,) = conn.execute("SELECT COUNT(*) FROM tasks").fetchone()
        return int(count)


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    path = tmp_path / "agent-team.db"
    with db.open_ledger(path) as ledger:
        db.migrate(ledger)
    return path


def test_the_cli_refuses_a_body_over_the_limit_naming_it_and_stores_nothing(
    tmp_path: Path, ledger_path: Path
) -> None:
    big = tmp_path / "body.md"
    big.write_text("x" * (5 * 1024 * 1024), encoding="utf-8")
    before = ledger_path.stat().st_size

    result = run_cli(
        tmp_path, "--db", str(ledger_path), "submit", "--title", "Big", "--body-file", str(big)
    )

    line = assert_one_line_error(result, 2)  # bad input
    assert f"{MAX_BODY_CHARS:,}" in line and "5,242,880" in line, line
    assert _task_count(ledger_path) == 0
    assert ledger_path.stat().st_size == before


def test_the_cli_accepts_a_body_exactly_at_the_limit(tmp_path: Path, ledger_path: Path) -> None:
    result = run_cli(
        tmp_path,
        "--db",
        str(ledger_path),
        "submit",
        "--title",
        "Edge",
        "--body",
        "y" * MAX_BODY_CHARS,
    )
    assert result.returncode == 0, result.stderr
    task_id = result.stdout.strip()
    with db.open_ledger(ledger_path, readonly=True) as ledger:
        task = db.get_task(ledger, task_id)
    assert task is not None and len(task.body) == MAX_BODY_CHARS


def test_the_api_refuses_the_same_body_with_413_naming_the_limit(ledger_path: Path) -> None:
    ctx = DashboardContext(settings=make_settings(ledger_path))
    with TestClient(create_app(ctx)) as client:
        response = client.post(
            "/api/tasks",
            json={"title": "Big", "body": "x" * (MAX_BODY_CHARS + 1)},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        long_title = client.post(
            "/api/tasks",
            json={"title": "t" * (MAX_TITLE_CHARS + 1)},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
    assert response.status_code == 413
    assert response.json()["field"] == "body"
    assert f"{MAX_BODY_CHARS:,}" in response.json()["error"]
    assert long_title.status_code == 400 and long_title.json()["field"] == "title"
    assert _task_count(ledger_path) == 0


def test_every_entry_point_shares_the_limit_in_submit_task(ledger_path: Path) -> None:
    with db.open_ledger(ledger_path) as ledger:
        with pytest.raises(TaskTooLargeError, match="title") as title_error:
            inbox.submit_task(ledger, title="t" * (MAX_TITLE_CHARS + 1))
        with pytest.raises(TaskTooLargeError, match="body"):
            inbox.submit_task(ledger, title="ok", body="b" * (MAX_BODY_CHARS + 1))
        assert title_error.value.field == "title"
        assert db.list_tasks(ledger) == []


def test_a_huge_github_issue_is_cut_to_fit_the_limit_note_included() -> None:
    issue = GitHubIssue.model_validate(
        {
            "number": 7,
            "title": "T" * 1000,
            "body": "é" * 1_000_000,
            "html_url": "https://github.com/a/b/issues/7",
            "state": "open",
        }
    )
    body = issue.task_body()
    assert len(body) <= MAX_BODY_CHARS
    assert body.startswith("é" * 1000) and "more characters cut" in body
    assert issue.html_url in body
    assert len(issue.task_title()) <= MAX_TITLE_CHARS


def test_a_body_stored_before_the_limit_is_shown_folded_and_bounded(ledger_path: Path) -> None:
    """Older ledgers may hold megabytes: the page shows the start, folded, and says what is left."""
    with db.open_ledger(ledger_path) as ledger:
        db.create_task(
            ledger,
            task_id="tBIG",
            kind="code",
            title="Old big one",
            body="line of text\n" * 400_000,
            source="cli",
            source_ref=None,
        )
    ctx = DashboardContext(settings=make_settings(ledger_path))
    with TestClient(create_app(ctx)) as client:
        page = client.get("/task/tBIG")
    assert page.status_code == 200
    assert len(page.text) < PAGE_BODY_CHARS + 50_000
    assert "<details>" in page.text and "Request text" in page.text
    left = 400_000 * len("line of text\n") - PAGE_BODY_CHARS
    assert f"{left:,} more characters not shown" in page.text
