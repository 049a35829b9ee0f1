"""`agent-team doctor`'s GitHub checks, in process against the loopback GitHub."""

from __future__ import annotations

from pathlib import Path

from agent_team import db
from agent_team.integrations.github.doctor import check_github_intake, check_github_last_poll
from agent_team.integrations.github.intake import GitHubIntake, make_client
from agent_team.integrations.github.settings import GitHubSettings
from tests.integration.github.conftest import APP, TOKEN, World, make_settings


def test_off_without_repositories(tmp_path: Path, world: World) -> None:
    settings = make_settings(tmp_path, world.fake, github_repos="")
    result = check_github_intake(settings)
    assert result.ok and "off" in result.detail


def test_writes_without_a_token_fail_with_a_fix(tmp_path: Path, world: World) -> None:
    settings = make_settings(tmp_path, world.fake, github_token=None, github_open_pr=True)
    result = check_github_intake(settings)
    assert not result.ok and "AGENT_TEAM_GITHUB_TOKEN" in result.fix


def test_unreachable_repositories_and_a_failing_last_poll(tmp_path: Path, world: World) -> None:
    settings = make_settings(tmp_path, world.fake, github_repos=f"{APP},acme/gone")
    result = check_github_intake(settings)
    assert not result.ok and "acme/gone" in result.detail and "404" in result.detail
    assert TOKEN not in result.detail

    db.init_db(settings.db_path)
    conn = db.open_ledger(settings.db_path)
    github = GitHubSettings.from_settings(settings)
    client = make_client(github)
    try:
        GitHubIntake(github, conn, lambda **_: "", client).poll_once()
    finally:
        client.close()
        conn.close()
    last = check_github_last_poll(settings)
    assert not last.ok and "acme/gone" in last.detail and "intake status" in last.fix

    healthy = make_settings(tmp_path, world.fake, github_repos=APP)
    assert check_github_intake(healthy).ok
    assert check_github_last_poll(healthy).ok
