"""Wiring the GitHub intake into a process (the daemon or `agent-team tick`).

Everything here is a no-op unless `AGENT_TEAM_GITHUB_REPOS` names at least one
repository. The publisher is built apart from the rest because the graph is
compiled inside `Coordinator.__init__`, so it must exist before the
coordinator does; it opens its own ledger connection on first use.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from agent_team import db
from agent_team.config import Settings
from agent_team.coordinator import Coordinator
from agent_team.integrations.github.intake import (
    GitHubClient,
    GitHubIntake,
    PollReport,
    make_client,
)
from agent_team.integrations.github.pr import PullRequestPublisher
from agent_team.integrations.github.status import StatusCommenter
from agent_team.integrations.github.webhook import WebhookHandler

__all__ = ["GitHubIntegration", "make_publisher"]

log = logging.getLogger(__name__)


def make_publisher(
    settings: Settings, *, transport: httpx.BaseTransport | None = None
) -> PullRequestPublisher | None:
    """The draft-PR publisher for `Coordinator(publish=...)`, or None when it is off."""
    if not settings.github_open_pr or not settings.github_repos:
        return None
    token = settings.github_token.get_secret_value() if settings.github_token else None
    return PullRequestPublisher(
        make_client(settings, transport=transport),
        lambda: db.connect(settings.db_path),
        token=token,
        repos=settings.github_repos,
        default_repo_path=settings.repo_path,
        api_url=settings.github_api_url,
    )


@dataclass
class GitHubIntegration:
    """The poller, the webhook handler and (optionally) the status commenter of one process."""

    settings: Settings
    client: GitHubClient
    intake: GitHubIntake
    webhook: WebhookHandler
    commenter: StatusCommenter | None
    publisher: PullRequestPublisher | None = None
    totals: PollReport = field(default_factory=PollReport)
    _totals_lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(
        cls,
        settings: Settings,
        coordinator: Coordinator,
        *,
        transport: httpx.BaseTransport | None = None,
        publisher: PullRequestPublisher | None = None,
    ) -> GitHubIntegration | None:
        """Build and attach (the status comment observer) to `coordinator`; None when off.

        Args:
            publisher: the one given to the coordinator, so `close()` closes its client too.
        """
        if not settings.github_repos:
            return None
        client = make_client(settings, transport=transport)
        intake = GitHubIntake(
            settings, coordinator.conn, coordinator.start_task, client, clock=coordinator.clock
        )
        secret = settings.github_webhook_secret
        webhook = WebhookHandler(intake, secret.get_secret_value() if secret else None)
        commenter = None
        if settings.github_comment:
            commenter = StatusCommenter(
                client, coordinator.conn, repos=settings.github_repos,
                dashboard_url=settings.dashboard_url,
            )  # fmt: skip
            coordinator.observers.append(commenter)
        return cls(settings, client, intake, webhook, commenter, publisher)

    def poll(self) -> PollReport:
        """One intake pass; adds to this process's totals."""
        report = self.intake.poll_once()
        with self._totals_lock:
            self.totals.polls += report.polls
            self.totals.not_modified += report.not_modified
            self.totals.tasks_created += report.tasks_created
            self.totals.recovered += report.recovered
        if report.tasks_created or report.errors or report.recovered:
            log.info(
                "github intake: %d poll(s), %d not modified, %d task(s) created, "
                "%d recovered, %d error(s)",
                report.polls, report.not_modified, report.tasks_created, report.recovered,
                len(report.errors),
            )  # fmt: skip
        return report

    def poll_forever(
        self,
        stop: threading.Event,
        first: bool,
        *,
        beat: Callable[[], None],
        set_fact: Callable[[str, object], None],
    ) -> None:
        """The daemon's `github-poller` loop: a pass every `AGENT_TEAM_GITHUB_POLL_S`."""
        try:
            self._poll_until(stop, beat=beat, set_fact=set_fact)
        finally:
            self.close()  # no pooled sockets left open when the daemon stops

    def _poll_until(
        self,
        stop: threading.Event,
        *,
        beat: Callable[[], None],
        set_fact: Callable[[str, object], None],
    ) -> None:
        while not stop.is_set():
            report = self.poll()
            with self._totals_lock:
                totals = (self.totals.polls, self.totals.not_modified, self.totals.tasks_created)
            set_fact("intake_polls", totals[0])
            set_fact("intake_not_modified", totals[1])
            set_fact(
                "github_last_poll",
                {
                    "at": datetime.now(UTC).isoformat(),
                    "polls": report.polls,
                    "not_modified": report.not_modified,
                    "deferred": report.deferred,
                    "tasks_created": report.tasks_created,
                    "tasks_created_total": totals[2],
                    "errors": report.errors[:10],
                },
            )
            beat()
            stop.wait(self.settings.github_poll_s)

    def close(self) -> None:
        self.client.close()
        if self.publisher is not None:
            self.publisher.client.close()
