"""`agent-team doctor`'s Confluence check: settings complete, site reachable, space visible.

Read-only: it reads the configured space (never a page, never a write), so it
is safe to run against production at any time.
"""

from __future__ import annotations

from agent_team.config import Settings
from agent_team.exceptions import AgentTeamError
from agent_team.health.checks import CheckResult
from agent_team.integrations.confluence.client import ConfluenceClient
from agent_team.integrations.confluence.settings import ConfluenceSettings

__all__ = ["check_confluence"]

NAME = "confluence"


def check_confluence(settings: Settings) -> CheckResult:
    confluence = ConfluenceSettings.from_settings(settings)
    if not confluence.enabled:
        return CheckResult(NAME, True, "off (AGENT_TEAM_CONFLUENCE_ENABLED=false)")
    mode = "dry-run: writes are recorded, not sent" if confluence.dry_run else "writes on"
    if not confluence.base_url:
        if confluence.dry_run and confluence.space_id:
            return CheckResult(
                NAME,
                True,
                f"on, {mode}; no base URL, so only new pages can be drafted",
                "set AGENT_TEAM_CONFLUENCE_BASE_URL to read and update existing pages",
            )
        return CheckResult(
            NAME,
            False,
            "on, but AGENT_TEAM_CONFLUENCE_BASE_URL is not set",
            "set AGENT_TEAM_CONFLUENCE_BASE_URL (e.g. https://example.atlassian.net/wiki)",
        )
    if not confluence.space_id:
        return CheckResult(
            NAME,
            False,
            "on, but AGENT_TEAM_CONFLUENCE_SPACE_ID is not set",
            "set AGENT_TEAM_CONFLUENCE_SPACE_ID (the space's numeric id)",
        )
    try:
        client = ConfluenceClient.from_settings(confluence, max_attempts=2, timeout_s=10.0)
    except AgentTeamError as exc:
        return CheckResult(NAME, False, str(exc), "set the Confluence credentials")
    try:
        found = client.space_exists(confluence.space_id)
    except AgentTeamError as exc:
        return CheckResult(
            NAME, False, str(exc), "check AGENT_TEAM_CONFLUENCE_BASE_URL and the credentials"
        )
    finally:
        client.close()
    if not found:
        return CheckResult(
            NAME,
            False,
            f"space {confluence.space_id} does not exist or is not visible",
            "fix AGENT_TEAM_CONFLUENCE_SPACE_ID or give the account access to the space",
        )
    auth = "OAuth client credentials" if confluence.client_id else "Basic (API token)"
    return CheckResult(NAME, True, f"on, {mode}; space {confluence.space_id} visible via {auth}")
