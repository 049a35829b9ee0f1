"""`agent-team daemons`: the table and `--json`, read from the ledger with no daemon running."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_team import db
from agent_team.cli.main import app
from agent_team.config import ENV_PREFIX
from tests.integration.test_cli import cells


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CliRunner:
    for name in list(os.environ):
        if name.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "250")
    return CliRunner()


def _daemon(n: int) -> db.DaemonStart:
    return db.DaemonStart(
        instance_id=f"box-{n}:{n}:20261201T120000.000000Z",
        host=f"box-{n}",
        pid=4000 + n,
        version="3.1.4",
        url=f"http://box-{n}:8080/",
        lease_s=30.0,
        started_at=db.utc_now() - timedelta(hours=1),
    )


def test_daemons_says_when_none_ran(runner: CliRunner, tmp_path: Path) -> None:
    db.init_db(tmp_path / "agent-team.db")

    result = runner.invoke(app, ["daemons"])

    assert result.exit_code == 0, result.output
    assert result.output.strip() == "no daemon has run on this ledger (in the last 7 days)"
    as_json = runner.invoke(app, ["daemons", "--json"])
    assert json.loads(as_json.output)["daemons"] == []


def test_daemons_lists_up_gone_and_stopped_with_what_they_hold(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    up, killed, stopped = _daemon(1), _daemon(2), _daemon(3)
    now = db.utc_now()
    with db.open_ledger(path) as ledger:
        db.register_daemon(ledger, up, now=now)
        db.register_daemon(ledger, killed, now=now - timedelta(minutes=2))
        db.register_daemon(ledger, stopped, now=now - timedelta(minutes=9))
        db.daemon_stopped(ledger, stopped.instance_id, now=now - timedelta(minutes=5))
        assert db.acquire_lease(ledger, name="loop:timers", owner=up.instance_id, lease_s=600)
        assert db.acquire_lease(ledger, name="task:t-7", owner=up.instance_id, lease_s=600)

    result = runner.invoke(app, ["daemons"])

    assert result.exit_code == 0, result.output
    row = cells(result.output, up.instance_id)
    assert row[1:5] == ["box-1", "4001", "up", "3.1.4"]
    assert "http://box-1:8080/" in row and "timers" in row and "t-7" in row
    assert "gone" in cells(result.output, killed.instance_id)
    assert "stopped" in cells(result.output, stopped.instance_id)
    assert result.output.strip().endswith("1 up, 1 gone, 1 stopped")

    body = json.loads(runner.invoke(app, ["daemons", "--json"]).output)
    assert [(d["host"], d["status"]) for d in body["daemons"]] == [
        ("box-1", "up"),
        ("box-2", "gone"),
        ("box-3", "stopped"),
    ]
    assert body["daemons"][0]["loops"] == ["timers"] and body["daemons"][0]["tasks"] == ["t-7"]
