"""CI on a task's pull request, watched: a flaky failure rerun once, a red head asked about.

Called by the PR watcher (`pr_watch.PullRequestWatcher`) for an open PR with
no feedback to act on, on its current head commit:

- pending (or nothing reported yet): wait;
- red, and the failure looks flaky (`ci_report.flaky_reason`: it passed on the
  base branch's head, it timed out, its log names a network error): rerun the
  failed jobs of each failed workflow run, **once per head commit** (the
  `ci_rerun` event is stored before the reruns are asked for: a crash between
  the two loses the rerun, never repeats it), then wait for the new attempt;
- still red (or not flaky): answer the PR gate `ci_failed` with the failing
  checks' names and a short redacted log excerpt each, and the PR's
  `pr_decision` gate asks a person: fix / ignore / take over;
- green: stored once per head (the timeline), and with
  `AGENT_TEAM_GITHUB_READY_WHEN_GREEN` the draft is marked ready for review when
  every required check is green and no review still requests changes, and the
  task's thread is told. The daemon never merges.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_team import db
from agent_team.integrations.github.ci import CiReader
from agent_team.integrations.github.ci_logs import LogExcerpt
from agent_team.integrations.github.ci_report import Check, CiReport, flaky_reason
from agent_team.integrations.github.intake import GitHubError
from agent_team.integrations.github.pr_replies import PullRequestWrites
from agent_team.integrations.github.pulls import PullRequests, PullState

__all__ = ["CiWatch", "GateAnswer"]

log = logging.getLogger(__name__)

EXCERPT_LINES = 30
EXCERPT_CHARS = 3000
MAX_CHECKS = 10


@dataclass(frozen=True)
class GateAnswer:
    """What to answer the PR gate with, and the events the answer acts on."""

    answer: dict[str, Any]
    events: list[db.NewPrEvent]
    via: str


class CiWatch:
    def __init__(
        self,
        reader: CiReader,
        writes: PullRequestWrites,
        ledger: db.Ledger,
        *,
        clock: Callable[[], datetime],
        ready_when_green: bool,
        notify: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.reader = reader
        self.pulls = PullRequests(reader.client)
        self.writes = writes
        self.ledger = ledger
        self.clock = clock
        self.ready_when_green = ready_when_green
        self.notify = notify

    def step(self, pull: db.PullRequestRow, state: PullState) -> GateAnswer | None:
        """One look at CI on `state`'s head; an answer for the gate when a person must decide."""
        head = state.head_sha
        known = db.pr_event_keys(self.ledger, pull.task_id)
        report = self.reader.report(
            pull.repo, head, required=self.reader.required_checks(pull.repo, state.base_ref)
        )
        if report.state == "pending" or not report.started:
            return None
        if report.state == "green":
            self._record_green(pull, state, report, known)
        if report.required_state == "green":
            self._maybe_ready(pull, state)  # a red check nothing requires does not hold it
        if report.state == "green" or f"ci:{head}:failed" in known:
            return None  # green, or a person was asked about this head already
        failed = report.failed[:MAX_CHECKS]
        # Each failed job's log is read once a look: to judge a flake, then to show it.
        logs = {
            check.id: self.reader.log_excerpt(
                pull.repo, check.job_id, max_lines=EXCERPT_LINES, max_chars=EXCERPT_CHARS
            )
            for check in failed
            if check.job_id is not None
        }
        rerun_key = f"ci:{head}:rerun"
        if rerun_key not in known and self._rerun(pull, state, failed, logs, rerun_key):
            return None
        checks = [_described(check, logs.get(check.id), rerun_key in known) for check in failed]
        return GateAnswer(
            answer={"decision": "ci_failed", "head_sha": head, "checks": checks},
            events=[
                db.NewPrEvent(
                    f"ci:{head}:failed",
                    "ci_failed",
                    round=pull.rounds,
                    head_sha=head,
                    actor="ci",
                    detail={"checks": [check.name for check in failed]},
                )
            ],
            via="github:ci",
        )

    def _rerun(
        self,
        pull: db.PullRequestRow,
        state: PullState,
        failed: tuple[Check, ...],
        logs: dict[int, LogExcerpt],
        key: str,
    ) -> bool:
        """Rerun the failed jobs when the failure looks flaky; True when a rerun started."""
        runs = sorted({check.run_id for check in failed if check.run_id is not None})
        if not runs:
            return False  # commit statuses and third-party checks: nothing GitHub can rerun
        base = self._base_report(pull.repo, state)
        reasons = [flaky_reason(check, logs.get(check.id) or "", base) for check in failed]
        if not all(reasons):
            return False  # one real failure is enough to ask a person
        event = db.NewPrEvent(
            key,
            "ci_rerun",
            round=pull.rounds,
            head_sha=state.head_sha,
            actor="agent-team",
            detail={"checks": [c.name for c in failed], "runs": runs, "why": reasons[0]},
        )
        if not db.record_pr_event(self.ledger, pull.task_id, event, at=self.clock()):
            return True  # another look got here first and reran: wait for its attempt
        for run_id in runs:
            try:
                self.reader.rerun_failed_jobs(pull.repo, run_id)
            except GitHubError as exc:
                log.warning("github pulls: %s#%d: no rerun: %s", pull.repo, pull.number, exc)
                return False
        log.info(
            "github pulls: %s#%d: reran the failed jobs of %s (%s)",
            pull.repo,
            pull.number,
            ", ".join(map(str, runs)),
            reasons[0],
        )
        return True

    def _base_report(self, repo: str, state: PullState) -> CiReport | None:
        try:
            return self.reader.report(repo, state.base_sha)
        except GitHubError:
            return None  # without the base's CI, only the log can call a failure flaky

    def _record_green(
        self, pull: db.PullRequestRow, state: PullState, report: CiReport, known: set[str]
    ) -> None:
        key = f"ci:{state.head_sha}:green"
        if key in known:
            return
        db.record_pr_event(
            self.ledger,
            pull.task_id,
            db.NewPrEvent(
                key,
                "ci_green",
                round=pull.rounds,
                head_sha=state.head_sha,
                actor="ci",
                detail={"checks": len(report.checks)},
            ),
            at=self.clock(),
        )

    def _maybe_ready(self, pull: db.PullRequestRow, state: PullState) -> None:
        """Mark the draft ready: required checks green (the caller knows), no review blocking."""
        if not self.ready_when_green or not state.draft or pull.ready_at is not None:
            return
        if self._changes_requested(pull):
            return
        self.writes.mark_ready(
            pull.task_id,
            pull.repo,
            pull.number,
            state.node_id,
            effect_id=f"github:ready:{pull.task_id}",
        )
        now = self.clock()
        db.note_pull_request(self.ledger, pull.task_id, ready_at=now)
        db.record_pr_event(
            self.ledger,
            pull.task_id,
            db.NewPrEvent(
                f"ready:{state.head_sha}", "ready", round=pull.rounds, head_sha=state.head_sha
            ),
            at=now,
        )
        log.info("github pulls: %s#%d marked ready for review", pull.repo, pull.number)
        if self.notify is not None:
            self.notify(
                pull.task_id,
                "ready",
                f"pull request {pull.url} is green and marked ready for review",
            )

    def _changes_requested(self, pull: db.PullRequestRow) -> bool:
        """Whether a reviewer's latest say is still "changes requested"."""
        latest: dict[str, str] = {}
        for review in self.pulls.reviews(pull.repo, pull.number):
            if review.user and review.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
                latest[review.user.lower()] = review.state
        return "CHANGES_REQUESTED" in latest.values()


def _described(check: Check, log: LogExcerpt | None, rerun: bool) -> dict[str, Any]:
    """A failed check as the gate's answer carries it (bounded as `FailedCheck` takes it)."""
    excerpt = ""
    if log is not None:
        excerpt = log.text or (f"(log unavailable: {log.reason})" if log.reason else "")
    return {
        "name": check.name[:300],
        "conclusion": (check.conclusion or "failure")[:50],
        "url": check.url if check.url and len(check.url) <= 1000 else None,
        "excerpt": excerpt[:EXCERPT_CHARS],
        "rerun": rerun,
    }
