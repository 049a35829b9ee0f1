"""GitHub wired into a process (the daemon or `agent-team tick`): poller, webhook, comments.

Everything here is a no-op unless `AGENT_TEAM_GITHUB_REPOS` names at least one
repository. The publisher is built apart from the rest because the graph is
compiled inside `Coordinator.__init__`, so it must exist before the
coordinator does; it opens its own ledger connection on first use.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, ClassVar

import httpx

from agent_team import db
from agent_team.config import Settings
from agent_team.health.loops import Loop
from agent_team.integrations.github.ci import CiReader
from agent_team.integrations.github.ci_watch import CiWatch
from agent_team.integrations.github.follow_up import FollowUpDesk
from agent_team.integrations.github.intake import (
    GitHubClient,
    GitHubIntake,
    PollReport,
    make_client,
)
from agent_team.integrations.github.pr import PullRequestPublisher
from agent_team.integrations.github.pr_replies import PullRequestWrites
from agent_team.integrations.github.pr_watch import PullRequestWatcher, WatchReport
from agent_team.integrations.github.settings import GitHubSettings
from agent_team.integrations.github.status import StatusCommenter
from agent_team.integrations.github.webhook import WebhookHandler
from agent_team.nodes.pr_desk import PullRequestHook
from agent_team.nodes.publish import PublishHook

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from agent_team.coordinator import Coordinator, TaskObserver
    from agent_team.coordinator.loop_lease import LoopLease
    from agent_team.health.checks import CheckFn
    from agent_team.health.status import Health

__all__ = ["GitHubIntegration", "GitHubSettings", "make_publisher", "publishes"]

log = logging.getLogger(__name__)


def publishes(settings: GitHubSettings) -> bool:
    """Whether finished builds become draft pull requests (the graph then has `publish`)."""
    return settings.open_pr and bool(settings.repos)


def make_publisher(
    settings: GitHubSettings,
    *,
    ledger: db.Ledger | None = None,
    transport: httpx.BaseTransport | None = None,
) -> PullRequestPublisher | None:
    """The draft-PR publisher for the graph's `publish` node, or None when it is off.

    Args:
        ledger: the process's ledger, shared (None: it opens its own on first use).
    """
    if not publishes(settings):
        return None
    token = settings.token.get_secret_value() if settings.token else None
    return PullRequestPublisher(
        make_client(settings, transport=transport),
        ledger=ledger,
        connect=None if ledger is not None else (lambda: db.open_ledger(settings.ledger_target)),
        token=token,
        repos=settings.repos,
        default_repo_path=settings.repo_path,
        api_url=settings.api_url,
        state_dir=settings.state_dir,
    )


@dataclass
class GitHubIntegration:
    """The poller, the webhook handler and (optionally) the status commenter of one process."""

    name: ClassVar[str] = "github"

    settings: GitHubSettings
    client: GitHubClient
    intake: GitHubIntake
    webhook: WebhookHandler
    commenter: StatusCommenter | None
    publisher: PullRequestPublisher | None = None
    poll_lease: LoopLease | None = None  # None: this process polls whenever asked
    # The PR gate's answerer (None: the graph has no PR gate) and its loop's lease.
    watcher: PullRequestWatcher | None = None
    watch_lease: LoopLease | None = None
    totals: PollReport = field(default_factory=PollReport)
    _totals_lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def enabled(cls, settings: Settings) -> bool:
        return bool(settings.github_repos)

    @classmethod
    def doctor_checks(cls) -> Sequence[CheckFn]:
        from agent_team.integrations.github.doctor import (
            check_github_intake,
            check_github_last_poll,
        )

        return (check_github_intake, check_github_last_poll)

    @classmethod
    def create(
        cls,
        settings: Settings,
        coordinator: Coordinator,
        *,
        transport: httpx.BaseTransport | None = None,
        publisher: PullRequestPublisher | None = None,
    ) -> GitHubIntegration:
        """Build the parts against `coordinator`; the status commenter is in `observers()`.

        When builds are published and no `publisher` is given, the draft-PR
        publisher is made here on the coordinator's ledger and bound to the
        graph's publish hook.

        Args:
            publisher: one the coordinator's graph already calls (tests), so
                `close()` closes it too.
        """
        github = GitHubSettings.from_settings(settings)
        if publisher is None and publishes(github):
            publisher = make_publisher(github, ledger=coordinator.ledger, transport=transport)
            hook = coordinator.deps.publish
            if isinstance(hook, PublishHook) and publisher is not None:
                hook.bind(publisher)
        client = make_client(github, transport=transport)
        intake = GitHubIntake(
            github, coordinator.ledger, coordinator.start_task, client, clock=coordinator.clock
        )
        watcher = None
        pulls_hook = coordinator.deps.pulls
        if isinstance(pulls_hook, PullRequestHook) and publisher is not None:
            writes = PullRequestWrites(client, coordinator.ledger)
            pulls_hook.bind(FollowUpDesk(publisher, writes))
            ci = None
            if github.ci_watch:
                ci = CiWatch(
                    CiReader(client),
                    writes,
                    coordinator.ledger,
                    clock=coordinator.clock,
                    ready_when_green=github.ready_when_green,
                    notify=coordinator.runner.notify,
                )
            watcher = PullRequestWatcher(
                client,
                coordinator.ledger,
                coordinator.requests,
                reviewers=github.reviewers,
                handle=github.handle,
                clock=coordinator.clock,
                ci=ci,
            )
            if not github.reviewers:
                log.info(
                    "github: no AGENT_TEAM_GITHUB_REVIEWERS: reviews are not acted on; a merge "
                    "or a close of a task's pull request still ends the task"
                )
        secret = github.webhook_secret
        webhook = WebhookHandler(
            intake, secret.get_secret_value() if secret else None, watcher=watcher
        )
        commenter = None
        if github.comment:
            commenter = StatusCommenter(
                client,
                coordinator.ledger,
                repos=github.repos,
                dashboard_url=github.dashboard_url,
            )
        # Several daemons on one database poll by turns: one rate limit spent, not one each.
        poll_lease = coordinator.loop_lease("github-poller", every_s=github.poll_s)
        watch_lease = (
            coordinator.loop_lease("github-pulls", every_s=github.pr_poll_s)
            if watcher is not None
            else None
        )
        return cls(
            github,
            client,
            intake,
            webhook,
            commenter,
            publisher,
            poll_lease,
            watcher=watcher,
            watch_lease=watch_lease,
        )

    def routes(self) -> Sequence[BaseRoute]:
        return [self.webhook.route()]

    def loops(self, health: Health) -> Sequence[Loop]:
        poller = partial(
            self.poll_forever, beat=lambda: health.beat("github-poller"), set_fact=health.set_fact
        )
        loops = [Loop("github-poller", poller)]
        if self.watcher is not None:
            watch = partial(self.watch_forever, beat=lambda: health.beat("github-pulls"))
            loops.append(Loop("github-pulls", watch))
        return loops

    def watch_pulls(self) -> WatchReport:
        """One look at every watched pull request (`tick`, and the loop's pass)."""
        if self.watcher is None:
            return WatchReport()
        return self.watcher.poll_once()

    def watch_forever(
        self, stop: threading.Event, first: bool, *, beat: Callable[[], None]
    ) -> None:
        """The daemon's `github-pulls` loop: a pass every `AGENT_TEAM_GITHUB_PR_POLL_S`."""
        while not stop.is_set():
            if self.watch_lease is None or self.watch_lease.turn():
                self.watch_pulls()
            beat()
            stop.wait(self.settings.pr_poll_s)

    def observers(self) -> Sequence[TaskObserver]:
        return [self.commenter] if self.commenter is not None else []

    def facts(self) -> dict[str, object]:
        return {}  # the poller reports its own, pass by pass

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
                report.polls,
                report.not_modified,
                report.tasks_created,
                report.recovered,
                len(report.errors),
            )
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
            self._close_clients()  # no pooled sockets left open when the daemon stops

    def _poll_until(
        self,
        stop: threading.Event,
        *,
        beat: Callable[[], None],
        set_fact: Callable[[str, object], None],
    ) -> None:
        while not stop.is_set():
            if self.poll_lease is not None and not self.poll_lease.turn():
                set_fact("github_last_poll", {"at": None, "polled_by": "another instance"})
                beat()
                stop.wait(self.settings.poll_s)
                continue
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
            stop.wait(self.settings.poll_s)

    def close(self) -> None:
        """Its clients, and the publisher's client and (if it opened one) ledger.

        After the last run: the poller closes the clients when its loop ends, but a
        run that finishes inside the grace period (status comment, PR) opens them again.
        """
        if self.publisher is not None:
            self.publisher.close_ledger()
        self._close_clients()

    def _close_clients(self) -> None:
        self.client.close()
        if self.publisher is not None:
            self.publisher.client.close()
