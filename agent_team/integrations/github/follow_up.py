"""A follow-up commit reaches its pull request: pushed, answered, resolved, re-requested.

`nodes.pull_request.follow_up` builds the commit; this is `GraphDeps.pulls`,
which hands it to GitHub. Every write is an effect under a key that names the
task and the round (`github:push:<task>:r<n>`, `github:reply:<task>:r<n>:<comment>`,
...), so a node re-run after `kill -9` at any point pushes and comments once.
Before anything is pushed the commit is checked: one whose whole change is
removing or skipping tests is refused (`builders.test_guard`), and the node
asks a person instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent_team.builders.base import BuildResult
from agent_team.builders.gitcmd import run_git
from agent_team.builders.test_guard import weakens_tests_only
from agent_team.exceptions import BuildError, PublishFailedError
from agent_team.integrations.github.intake import GitHubError
from agent_team.integrations.github.pr import PullRequestPublisher
from agent_team.integrations.github.pr_replies import PullRequestWrites
from agent_team.integrations.github.pulls import PullRequests
from agent_team.task_model import TaskState

__all__ = ["FollowUpDesk"]

log = logging.getLogger(__name__)


class FollowUpDesk:
    """`PullRequestDesk` for GitHub: the publisher's push, then the replies."""

    def __init__(self, publisher: PullRequestPublisher, writes: PullRequestWrites) -> None:
        self.publisher = publisher
        self.writes = writes

    def follow_up(
        self,
        state: TaskState,
        build: BuildResult,
        round_: int,
        items: Sequence[dict[str, Any]],
        crash: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        try:
            return self._follow_up(state, build, round_, items, crash)
        except GitHubError as exc:
            raise PublishFailedError(
                f"{exc}; the follow-up is kept on its branch: fix the cause, then "
                "`agent-team retry` pushes it"
            ) from exc

    @staticmethod
    def _refusal(checkout: Path, before: str, build: BuildResult) -> tuple[str, str] | None:
        """Why the commit must not be pushed (`(code, reason)`), or None."""
        try:
            if (
                before == build.commit
                or not run_git(
                    checkout, "diff", "--name-only", before, build.commit, "--"
                ).stdout.strip()
            ):
                return "no_change", "the follow-up changed nothing"
            refused = weakens_tests_only(checkout, before, build.commit)
        except BuildError as exc:
            raise GitHubError(f"cannot check the follow-up commit: {exc}") from None
        return ("tests_removed", refused) if refused else None

    @staticmethod
    def _set_back(checkout: Path, build: BuildResult, before: str) -> None:
        """The next follow-up starts from what reviewers saw, not from a refused commit."""
        if before == build.commit:
            return
        try:
            run_git(checkout, "update-ref", f"refs/heads/{build.branch}", before, build.commit)
        except BuildError as exc:
            raise GitHubError(f"cannot set the branch back: {exc}") from None

    def _follow_up(
        self,
        state: TaskState,
        build: BuildResult,
        round_: int,
        items: Sequence[dict[str, Any]],
        crash: Callable[[str], None] | None,
    ) -> dict[str, Any]:
        task_id = state["task_id"]
        pull = state.get("pull_request") or {}
        repo, number = str(pull["repo"]), int(pull["number"])
        checkout = self.publisher.checkout_for(state, repo)
        before = pull.get("head")
        current, _ = PullRequests(self.writes.client).get(repo, number)
        if current is not None and current.outcome != "open":
            # Merged or closed while the follow-up was built: push nothing, say nothing;
            # the gate hears of it from the watcher.
            return {"ended": current.outcome}
        if before and not state.get("pr_force"):
            refused = self._refusal(checkout, str(before), build)
            if refused:
                log.warning(
                    "github: task %s follow-up %d not pushed: %s", task_id, round_, refused[1]
                )
                self._set_back(checkout, build, str(before))
                return {"refused": refused[1], "refused_code": refused[0]}
        self.publisher.push(
            task_id,
            repo,
            checkout,
            build.branch,
            build.commit,
            effect_id=f"github:push:{task_id}:r{round_}",
            crash=crash,
        )
        short = build.commit[:12]
        replies = resolved = 0
        threads = sorted(
            {int(item["thread_comment_id"]) for item in items if item.get("thread_comment_id")}
        )
        for comment_id in threads:
            self.writes.reply(
                task_id,
                repo,
                number,
                comment_id,
                f"Addressed in {short} (follow-up {round_}).",
                effect_id=f"github:reply:{task_id}:r{round_}:{comment_id}",
            )
            replies += 1
            if self.writes.resolve_thread(
                task_id,
                repo,
                number,
                comment_id,
                effect_id=f"github:resolve:{task_id}:r{round_}:{comment_id}",
            ):
                resolved += 1
        people = sorted({str(item["user"]) for item in items if item.get("user")})
        summary = (
            f"Follow-up {round_}: pushed {short}, addressing {len(items)} review item(s)"
            + (f" from {', '.join('@' + p for p in people)}" if people else "")
            + f".\n\n{build.summary.strip()[:1500]}"
        )
        self.writes.comment(
            task_id, repo, number, summary, effect_id=f"github:summary:{task_id}:r{round_}"
        )
        reviewers = sorted(
            {
                str(item["user"])
                for item in items
                if item.get("user") and item.get("kind") in ("review", "review_comment")
            }
        )
        self.writes.request_review(
            task_id, repo, number, reviewers, effect_id=f"github:rerequest:{task_id}:r{round_}"
        )
        url = str(pull.get("url", "")).rstrip("/")
        return {
            "commit": build.commit,
            "url": f"{url}/commits/{build.commit}" if url else None,
            "replies": replies,
            "resolved": resolved,
        }
