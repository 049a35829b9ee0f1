"""`agent-team doctor`'s check of the LangGraph API: on or off, and whether anyone can use it."""

from __future__ import annotations

from agent_team import db
from agent_team.config import Settings
from agent_team.exceptions import ConfigError
from agent_team.health.checks import CheckResult
from agent_team.requests.access import DashboardTokens

__all__ = ["check_langgraph_api"]


def check_langgraph_api(settings: Settings) -> CheckResult:
    if not settings.langgraph_api:
        return CheckResult("langgraph api", True, "off (AGENT_TEAM_LANGGRAPH_API)")
    try:
        # People's keys in the ledger count: they are what an x-api-key is once people exist.
        tokens = DashboardTokens(
            settings, keys=lambda: db.open_ledger(settings.ledger_target, readonly=True)
        )
    except ConfigError as exc:
        return CheckResult("langgraph api", False, str(exc), "fix the dashboard tokens")
    if not tokens.enabled:
        return CheckResult(
            "langgraph api",
            False,
            "on, but there is no key or dashboard token to send as x-api-key",
            "agent-team key add NAME (or set AGENT_TEAM_DASHBOARD_TOKENS)",
        )
    host = settings.dashboard_url or f"http://{settings.dashboard_host}:{settings.dashboard_port}"
    origins = ", ".join(settings.langgraph_api_origins) or "none (no browser app may call it)"
    return CheckResult(
        "langgraph api",
        True,
        f"on at {host.rstrip('/')}/langgraph; browser origins: {origins}",
    )
