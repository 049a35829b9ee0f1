"""`agent-team doctor` on PostgreSQL: reachable, server, schema, checkpoints, connections."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

import pytest

from agent_team import db
from agent_team.config import load_settings
from agent_team.health.checks import CheckResult
from agent_team.service.doctor import check_config, check_ledger
from tests.integration.test_cli import run_cli


@pytest.fixture(autouse=True)
def _no_agent_team_env(isolated_env: Path) -> None:
    """Settings come from the test alone."""


def ledger_check(url: str, tmp_path: Path) -> CheckResult:
    return check_ledger(load_settings(database_url=url, db_path=tmp_path / "unused.db"))


def with_password(url: str) -> str:
    return url.replace("postgres@", "postgres:hunter2@")  # the test server trusts loopback


def test_an_empty_then_migrated_then_running_database(pg_url: str, tmp_path: Path) -> None:
    url = with_password(pg_url)
    empty = ledger_check(url, tmp_path)
    assert empty.ok, empty
    assert empty.detail.startswith("PostgreSQL 15.")
    assert "empty; the daemon creates the tables on start" in empty.detail
    assert "checkpoint tables set up on the daemon's start" in empty.detail
    assert "hunter2" not in empty.detail and "postgres:***@" in empty.detail
    assert f"a daemon holds up to {db.CONNECTIONS_PER_DAEMON}" in empty.detail

    db.init_db(url)
    with db.open_ledger(url) as ledger:
        ledger.checkpointer()
        ready = ledger_check(url, tmp_path)
    assert ready.ok, ready
    assert f"at schema version {db.SCHEMA_VERSION}; checkpoint tables ready" in ready.detail

    config = check_config(load_settings(database_url=url, db_path=tmp_path / "unused.db"))
    assert "postgres:***@" in config.detail and "hunter2" not in config.detail
    assert "unused.db" not in config.detail


def test_an_older_or_newer_schema(pg_url: str, tmp_path: Path) -> None:
    from agent_team.db.postgres_ledger import PostgresLedger
    from agent_team.db.schema_postgres import migrate_postgres

    with PostgresLedger(pg_url) as ledger:
        migrate_postgres(ledger, target=db.SCHEMA_VERSION - 1)
    older = ledger_check(pg_url, tmp_path)
    assert older.ok, older
    assert f"at schema version {db.SCHEMA_VERSION - 1}; the daemon migrates it" in older.detail

    db.init_db(pg_url)
    with PostgresLedger(pg_url) as ledger:
        ledger.execute("UPDATE schema_meta SET schema_version = 99")
    newer = ledger_check(pg_url, tmp_path)
    assert not newer.ok and "schema version 99, newer than this agent-team" in newer.detail
    assert newer.fix == "upgrade agent-team"


def test_a_server_without_room_for_another_daemon_fails(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = db.postgres_facts(pg_url)

    def crowded(_url: str) -> db.DatabaseFacts:  # five connections left: not enough
        return replace(real, connections_used=real.max_connections - real.reserved_connections - 5)

    monkeypatch.setattr(db, "postgres_facts", crowded)
    result = ledger_check(pg_url, tmp_path)
    assert not result.ok
    assert f"{real.max_connections - real.reserved_connections - 5} of " in result.detail
    assert "raise max_connections" in result.fix


def test_doctor_names_an_unreachable_server_without_its_password(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    url = f"postgresql://app:hunter2@127.0.0.1:{port}/agent_team"

    result = run_cli(tmp_path, "doctor", env={"AGENT_TEAM_DATABASE_URL": url})

    assert result.returncode == 1
    output = " ".join((result.stdout + result.stderr).split())
    assert "✗ │ ledger" in result.stdout
    assert "AGENT_TEAM_DATABASE_URL" in output and "cannot connect" in output
    assert "hunter2" not in result.stdout + result.stderr
