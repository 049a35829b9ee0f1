"""The GitHub settings group: what every module of this package reads, and nothing else.

A module of its own so the intake and the doctor checks can import it without
importing `integration.py` (which imports them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from agent_team.config import Settings

__all__ = ["GitHubSettings"]


@dataclass(frozen=True)
class GitHubSettings:
    """The `AGENT_TEAM_GITHUB_*` settings and the shared ones the intake and publisher use."""

    repos: tuple[str, ...]
    label: str
    docs_label: str
    token: SecretStr | None
    api_url: str
    poll_s: float
    webhook_secret: SecretStr | None
    comment: bool
    open_pr: bool
    checkouts: tuple[str, ...]
    confluence_enabled: bool
    dashboard_url: str | None
    db_path: Path
    ledger_target: str | Path  # what db.open_ledger opens: a SQLite path or a URL
    repo_path: Path | None
    state_dir: Path  # where mirrors of remote repositories live (`builders.repos`)
    # The loop after the pull request (issue #29)
    pr_gate: bool = True
    reviewers: tuple[str, ...] = ()
    handle: str = "@agent-team"
    pr_poll_s: float = 60.0
    ci_watch: bool = True
    ready_when_green: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> GitHubSettings:
        return cls(
            repos=tuple(settings.github_repos),
            label=settings.github_label,
            docs_label=settings.github_docs_label,
            token=settings.github_token,
            api_url=settings.github_api_url,
            poll_s=settings.github_poll_s,
            webhook_secret=settings.github_webhook_secret,
            comment=settings.github_comment,
            open_pr=settings.github_open_pr,
            checkouts=tuple(settings.github_checkouts),
            confluence_enabled=settings.confluence_enabled,
            dashboard_url=settings.dashboard_url,
            db_path=settings.db_path,
            ledger_target=settings.ledger_target,
            repo_path=settings.repo_path,
            state_dir=settings.state_folder(),
            pr_gate=settings.github_pr_gate,
            reviewers=tuple(settings.github_reviewers),
            handle=settings.github_handle,
            pr_poll_s=settings.github_pr_poll_s,
            ci_watch=settings.github_ci_watch,
            ready_when_green=settings.github_ready_when_green,
        )

    def checkout_paths(self) -> dict[str, Path]:
        """`owner/repo` (lower case) -> the local clone its tasks build in."""
        pairs = (entry.partition("=") for entry in self.checkouts)
        return {repo.strip().lower(): Path(path.strip()) for repo, _, path in pairs}
