"""`agent-team doctor` checks for the Slack transport."""

from __future__ import annotations

from slack_sdk.errors import SlackApiError

from agent_team.common.redact import redact
from agent_team.config import Settings
from agent_team.exceptions import ConfigError
from agent_team.health.checks import CheckResult, ledger_people
from agent_team.integrations.slack.settings import SlackSettings
from agent_team.integrations.slack.transport import make_web_client, require_slack_settings

__all__ = ["check_slack", "check_slack_allowed_users"]


def check_slack(settings: Settings) -> CheckResult:
    """The settings are complete and the bot token works (`auth.test`)."""
    slack = SlackSettings.from_settings(settings)
    if slack.transport != "slack":
        return CheckResult("slack", True, "not used (AGENT_TEAM_TRANSPORT=local)")
    try:
        require_slack_settings(slack)
    except ConfigError as exc:
        return CheckResult("slack", False, str(exc), "set the variables named above")
    mode = "socket mode" if slack.app_token else "HTTP mode at POST /slack/events"
    try:
        data = make_web_client(slack).auth_test().data
    except SlackApiError as exc:
        error = exc.response.get("error", "error") if exc.response is not None else "error"
        return CheckResult(
            "slack",
            False,
            f"auth.test refused the bot token: {error}",
            "check AGENT_TEAM_SLACK_BOT_TOKEN (an xoxb- token of the installed app)",
        )
    except Exception as exc:
        return CheckResult(
            "slack",
            False,
            f"cannot reach {slack.api_url}: {redact(str(exc))}",
            "check the network, or AGENT_TEAM_SLACK_API_URL",
        )
    who = data.get("user_id") if isinstance(data, dict) else None
    return CheckResult("slack", True, f"bot {who} posts to {slack.channel}; {mode}")


def check_slack_allowed_users(settings: Settings) -> CheckResult:
    """Fail closed is safe but useless: say so when nobody may answer."""
    slack = SlackSettings.from_settings(settings)
    if slack.transport != "slack":
        return CheckResult("slack allowed users", True, "not used")
    people = ledger_people(settings)
    if people:
        with_id = sum(1 for p in people if p.slack_id)
        ignored = (
            "; AGENT_TEAM_SLACK_ALLOWED_USERS no longer counts (people decide)"
            if slack.allowed_users
            else ""
        )
        if not with_id:
            return CheckResult(
                "slack allowed users",
                False,
                "nobody set up has a Slack id: nobody can answer questions in Slack" + ignored,
                "agent-team people add NAME --role ROLE --slack ID",
            )
        return CheckResult(
            "slack allowed users",
            True,
            f"{with_id} person(s) with a Slack id may answer, each as their role allows{ignored}",
            "remove AGENT_TEAM_SLACK_ALLOWED_USERS" if ignored else "",
            warn=bool(ignored),
        )
    if not slack.allowed_users:
        return CheckResult(
            "slack allowed users",
            False,
            "AGENT_TEAM_SLACK_ALLOWED_USERS is empty: nobody can answer questions in Slack",
            "set AGENT_TEAM_SLACK_ALLOWED_USERS to the Slack user ids, comma-separated",
        )
    count = len(slack.allowed_users)
    return CheckResult("slack allowed users", True, f"{count} user(s) may answer")
