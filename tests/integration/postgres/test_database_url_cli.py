"""The CLI on AGENT_TEAM_DATABASE_URL: PostgreSQL end to end; one line, exit 2, for a bad URL."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from agent_team.db.schema import SCHEMA_VERSION
from tests.integration.test_cli import assert_one_line_error, run_cli


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("command", [["migrate"], ["questions"], ["tick"]])
def test_an_unreachable_server_is_one_line_exit_2_without_the_password(
    tmp_path: Path, command: list[str]
) -> None:
    url = f"postgresql://app:hunter2@127.0.0.1:{_closed_port()}/agent_team"

    result = run_cli(tmp_path, *command, env={"AGENT_TEAM_DATABASE_URL": url})

    line = assert_one_line_error(result, 2)
    assert "AGENT_TEAM_DATABASE_URL" in line and "cannot connect" in line
    assert "app:***@127.0.0.1" in line
    assert "hunter2" not in result.stderr + result.stdout


def test_a_database_that_does_not_exist_is_named(pg_url: str, tmp_path: Path) -> None:
    url = pg_url.rsplit("/", 1)[0].replace("postgres@", "postgres:hunter2@") + "/nope"

    result = run_cli(tmp_path, "migrate", env={"AGENT_TEAM_DATABASE_URL": url})

    line = assert_one_line_error(result, 2)
    assert '"nope" does not exist' in line and "hunter2" not in result.stderr


def test_a_malformed_url_is_one_line_exit_2(tmp_path: Path) -> None:
    result = run_cli(
        tmp_path, "migrate", env={"AGENT_TEAM_DATABASE_URL": "postgresql://u:hunter2@h:x/db"}
    )
    line = assert_one_line_error(result, 2)
    assert "AGENT_TEAM_DATABASE_URL" in line and "hunter2" not in result.stderr


def test_migrate_submit_and_list_on_postgres(pg_url: str, tmp_path: Path) -> None:
    env = {"AGENT_TEAM_DATABASE_URL": pg_url}

    migrated = run_cli(tmp_path, "migrate", env=env)
    assert migrated.returncode == 0, migrated.stderr
    assert f"v0 -> v{SCHEMA_VERSION}" in migrated.stdout and pg_url in migrated.stdout
    again = run_cli(tmp_path, "migrate", env=env)
    assert "already current" in again.stdout
    submitted = run_cli(tmp_path, "submit", "--title", "on postgres", env=env)
    assert submitted.returncode == 0, submitted.stderr
    listed = run_cli(tmp_path, "tasks", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "on postgres" in listed.stdout
    assert not (tmp_path / "agent-team.db").exists(), "a SQLite file was made beside it"


def test_backup_on_postgres_points_at_pg_dump(pg_url: str, tmp_path: Path) -> None:
    url = pg_url.replace("postgres@", "postgres:hunter2@")
    result = run_cli(tmp_path, "backup", env={"AGENT_TEAM_DATABASE_URL": url})
    line = assert_one_line_error(result, 2)
    assert "pg_dump -Fc" in line and "hunter2" not in result.stderr + result.stdout
    assert not (tmp_path / "backups").exists()


def test_the_dashboard_outside_the_daemon_reads_and_writes_the_postgres_ledger(
    pg_url: str, tmp_path: Path
) -> None:
    from starlette.testclient import TestClient

    from agent_team import db
    from agent_team.config import load_settings
    from agent_team.dashboard.app import DashboardContext, create_app
    from agent_team.requests import inbox

    db.init_db(pg_url)
    with db.open_ledger(pg_url) as ledger:
        first = inbox.submit_task(ledger, title="on postgres", body="")
    settings = load_settings(
        db_path=tmp_path / "agent-team.db", database_url=pg_url, dashboard_tokens="ops:s3cret-token"
    )
    with TestClient(create_app(DashboardContext(settings))) as client:
        listed = client.get("/api/tasks").json()
        assert [task["id"] for task in listed["tasks"]] == [first]
        submitted = client.post(
            "/api/tasks",
            json={"title": "from the dashboard", "body": ""},
            headers={"Authorization": "Bearer s3cret-token"},
        )
        assert submitted.status_code < 300, submitted.text
    assert not (tmp_path / "agent-team.db").exists(), "nothing was opened beside it"
    with db.open_ledger(pg_url) as ledger:
        titles = {task.title for task in db.list_tasks(ledger)}
    assert titles == {"on postgres", "from the dashboard"}
