"""`agent-team doctor`'s Confluence check against the loopback fake."""

from __future__ import annotations

from typing import Any

from agent_team.config import load_settings
from agent_team.health.checks import CheckResult
from agent_team.service.doctor import run_checks
from tests.fakes import confluence_api as fc
from tests.integration.confluence.conftest import lane_settings


def confluence_check(**settings: Any) -> CheckResult:
    (result,) = [r for r in run_checks(load_settings(**settings)) if r.name == "confluence"]
    return result


def test_off_is_fine() -> None:
    result = confluence_check()
    assert result.ok and "off" in result.detail


def test_on_and_reachable(fake: fc.FakeConfluence) -> None:
    result = confluence_check(**lane_settings(fake))
    assert result.ok and "space 1001 visible via Basic" in result.detail
    assert "dry-run" in result.detail
    oauth = lane_settings(
        fake,
        confluence_email=None,
        confluence_api_token=None,
        confluence_client_id=fc.CLIENT_ID,
        confluence_client_secret=fc.CLIENT_SECRET,
        confluence_token_url=fake.token_url,
    )
    assert "via OAuth" in confluence_check(**oauth).detail


def test_problems_say_what_to_fix(fake: fc.FakeConfluence) -> None:
    wrong_space = confluence_check(**lane_settings(fake, confluence_space_id="777"))
    assert not wrong_space.ok and "AGENT_TEAM_CONFLUENCE_SPACE_ID" in wrong_space.fix
    bad_token = confluence_check(**lane_settings(fake, confluence_api_token="not-the-token"))
    assert not bad_token.ok and "401" in bad_token.detail
    assert "not-the-token" not in bad_token.detail + bad_token.fix
    no_url = confluence_check(confluence_enabled=True, confluence_dry_run=False)
    assert not no_url.ok and "BASE_URL" in no_url.fix
    no_creds = confluence_check(**lane_settings(fake, confluence_email=None))
    assert not no_creds.ok and "credentials are missing" in no_creds.detail
