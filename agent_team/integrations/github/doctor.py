"""`agent-team doctor` checks for the GitHub intake: settings, token, reachability, last poll."""

from __future__ import annotations

from agent_team import db
from agent_team.config import Settings
from agent_team.health.checks import CheckResult
from agent_team.integrations.github.intake import GitHubError, issue_source, make_client
from agent_team.integrations.github.settings import GitHubSettings

__all__ = ["check_github_intake", "check_github_last_poll"]


def check_github_intake(settings: Settings) -> CheckResult:
    github = GitHubSettings.from_settings(settings)
    repos = github.repos
    if not repos:
        return CheckResult("github intake", True, "off (AGENT_TEAM_GITHUB_REPOS is empty)")
    writes = github.comment or github.open_pr
    if writes and github.token is None:
        return CheckResult(
            "github intake",
            False,
            "status comments or draft PRs are on but there is no token",
            "set AGENT_TEAM_GITHUB_TOKEN (issues and pull requests: write; contents: write)",
        )
    client = make_client(github, timeout_s=5.0)  # doctor answers quickly or says why
    problems: list[str] = []
    try:
        for repo in repos:
            try:
                client.json("GET", f"repos/{repo}")
            except GitHubError as exc:
                problems.append(str(exc))
    finally:
        client.close()
    if problems:
        return CheckResult(
            "github intake",
            False,
            "; ".join(problems),
            "check AGENT_TEAM_GITHUB_REPOS, AGENT_TEAM_GITHUB_TOKEN and AGENT_TEAM_GITHUB_API_URL",
        )
    webhook = "webhook on" if github.webhook_secret else "webhook off (no secret)"
    return CheckResult(
        "github intake",
        True,
        f"{len(repos)} repo(s) reachable at {github.api_url}; label {github.label!r}; {webhook}",
    )


def check_github_last_poll(settings: Settings) -> CheckResult:
    github = GitHubSettings.from_settings(settings)
    if not github.repos or not github.db_path.exists():
        return CheckResult("github last poll", True, "no polls yet")
    with db.open_ledger(github.db_path, readonly=True) as ledger:
        cursors = {(c.source, c.label): c for c in db.list_cursors(ledger)}
    failing = []
    for repo in github.repos:
        cursor = cursors.get((issue_source(repo), github.label))
        if cursor is not None and cursor.last_error and cursor.failures:
            failing.append(f"{repo}: {cursor.last_error} ({cursor.failures} in a row)")
    if failing:
        return CheckResult(
            "github last poll",
            False,
            "; ".join(failing),
            "see `agent-team intake status` and the daemon's log",
        )
    polled = [c.last_poll_at for c in cursors.values() if c.last_poll_at]
    return CheckResult(
        "github last poll", True, f"last poll {max(polled)}" if polled else "no polls yet"
    )
