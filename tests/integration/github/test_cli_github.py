"""`agent-team tick`, `intake status` and `doctor` with GitHub intake, as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_team import db
from agent_team.config import ENV_PREFIX
from tests.fakes.github_api import FakeGitHub
from tests.integration.github.conftest import APP, TOKEN

AGENT_TEAM = Path(sys.executable).with_name("agent-team")


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN) as server:
        server.add_repo(APP)
        server.add_issue(APP, labels=("agent-team",), title="First")
        server.add_issue(APP, labels=("agent-team",), title="Second")
        server.add_issue(APP, labels=("wontfix",), title="Not ours")
        yield server


def run(
    tmp_path: Path, fake: FakeGitHub, *args: str, token: str = TOKEN
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(ENV_PREFIX)}
    env.update(
        NO_COLOR="1",
        COLUMNS="250",
        PYTHONIOENCODING="utf-8",
        AGENT_TEAM_DB_PATH=str(tmp_path / "agent-team.db"),
        AGENT_TEAM_GITHUB_REPOS=f"{APP},acme/missing",
        AGENT_TEAM_GITHUB_API_URL=fake.url,
        AGENT_TEAM_GITHUB_TOKEN=token,
        AGENT_TEAM_DASHBOARD_PORT="0",
    )
    return subprocess.run(
        [str(AGENT_TEAM), *args],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=90,
        check=False,
    )


@pytest.mark.slow
def test_tick_polls_once_and_intake_status_shows_the_cursor(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    first = run(tmp_path, fake, "tick")
    assert first.returncode == 0, first.stderr
    assert "github intake: 2 poll(s), 0 not modified, 2 task(s) created" in first.stdout
    assert "acme/missing" in first.stderr and "404" in first.stderr
    conn = db.open_ledger(tmp_path / "agent-team.db")
    try:
        tasks = [t for t in db.list_tasks(conn) if t.source == "github"]
    finally:
        conn.close()
    assert sorted(t.title for t in tasks) == ["First", "Second"]

    second = run(tmp_path, fake, "tick")
    assert "1 not modified, 0 task(s) created" in second.stdout

    table = run(tmp_path, fake, "intake", "status")
    assert table.returncode == 0, table.stderr
    assert "acme/app" in table.stdout and "1/2 (50%)" in table.stdout
    rows = json.loads(run(tmp_path, fake, "intake", "status", "--json").stdout)
    mine = next(r for r in rows if r["source"] == "github:acme/app")
    assert mine["etag_hit_rate"] == 0.5 and mine["tasks_created"] == 2
    assert mine["rate_remaining"] is not None
    missing = next(r for r in rows if r["source"] == "github:acme/missing")
    assert missing["failures"] == 1 and "404" in missing["last_error"]
    for result in (first, second, table):
        assert TOKEN not in result.stdout + result.stderr


@pytest.mark.slow
def test_doctor_checks_the_repositories_without_showing_the_token(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    fake.token = "the-real-one"
    result = run(tmp_path, fake, "doctor")
    assert result.returncode == 1
    assert "github intake" in result.stdout and "401" in result.stdout
    assert TOKEN not in result.stdout + result.stderr
    fake.token = TOKEN
    fake.add_repo("acme/missing")
    result = run(tmp_path, fake, "doctor")
    assert "2 repo(s) reachable" in result.stdout, result.stdout
