"""The status comment: one comment per GitHub task, edited in place as the task moves.

A coordinator observer (`Coordinator.observers`). The comment's id is kept in
`side_effects` under `github:comment:<task>`, so a restarted daemon edits the
comment instead of posting a second one. A crash between the POST and the
record leaves a `pending` row; then the issue's comments are searched for our
hidden marker before anything is posted again. Observers must never raise:
every failure is a log line, and the next event tries again with newer text.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from agent_team import db
from agent_team.integrations.github.intake import SOURCE, GitHubClient, GitHubError, parse_issue_url
from agent_team.task_model import Phase

__all__ = ["StatusCommenter", "comment_body", "find_marked_comment", "marker"]

log = logging.getLogger(__name__)

_HEADLINES = {
    "started": "started",
    "waiting": "waiting on a person",
    "parked": "parked",
    "done": "done",
    "failed": "failed",
    "cancelled": "cancelled",
}
_TEXT_LIMIT = 4000


def marker(task_id: str) -> str:
    """A hidden line that finds our comment again after a crash."""
    return f"<!-- agent-team:{task_id} -->"


def comment_body(task: db.Task, event: str, text: str, dashboard_url: str | None) -> str:
    headline = _HEADLINES.get(event, event)
    if event == "waiting" and task.phase == Phase.PR_OPEN:
        headline = "pull request open"  # waiting on its reviewers, CI and a merge
    detail = " ".join(text.split())
    if len(detail) > _TEXT_LIMIT:
        detail = detail[: _TEXT_LIMIT - 1] + "…"
    lines = [marker(task.id), f"**agent-team** — task `{task.id}`: **{headline}**", "", detail]
    if dashboard_url:
        lines += ["", f"Details: {dashboard_url.rstrip('/')}/task/{task.id}"]
    return "\n".join(lines)


class StatusCommenter:
    """`(task, event, text)` observer keeping one comment per task up to date."""

    def __init__(
        self,
        client: GitHubClient,
        ledger: db.Ledger,
        *,
        repos: Sequence[str],
        dashboard_url: str | None = None,
    ) -> None:
        self.client = client
        self.ledger = ledger  # the coordinator's: observers run after it exists
        self.repos = {repo.lower() for repo in repos}
        self.dashboard_url = dashboard_url
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, task_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(task_id, threading.Lock())

    def __call__(self, task: db.Task, event: str, text: str) -> None:
        if task.source != SOURCE:
            return
        where = parse_issue_url(task.source_ref)
        if where is None or where[0].lower() not in self.repos:
            return
        try:
            with self._lock(task.id):
                self.update(
                    task, where[0], where[1], comment_body(task, event, text, self.dashboard_url)
                )
        except Exception as exc:  # an observer never fails the task
            log.warning(
                "github: could not update the status comment of %s: %s",
                task.id,
                self.client.clean(f"{type(exc).__name__}: {exc}"),
            )

    def update(self, task: db.Task, repo: str, number: int, body: str) -> str:
        """Create or edit the task's comment; returns the comment id."""
        effect_id = f"github:comment:{task.id}"
        effect = db.begin_effect(
            self.ledger,
            effect_id=effect_id,
            task_id=task.id,
            kind="github_comment",
            request={"repo": repo, "issue": number},
        )
        comment_id = effect.result_ref
        request = effect.request if isinstance(effect.request, dict) else {}
        if comment_id is None and request.get("posting"):
            comment_id = self._find_ours(repo, number, task.id)  # a crash around the POST
        if comment_id is not None:
            try:
                self.client.json(
                    "PATCH", f"repos/{repo}/issues/comments/{comment_id}", json={"body": body}
                )
            except GitHubError as exc:
                if exc.status != 404:
                    raise
                comment_id = None  # someone deleted it: post a new one
        if comment_id is None:
            db.finish_effect(
                self.ledger,
                effect_id=effect_id,
                state="pending",
                request={"repo": repo, "issue": number, "posting": True},
            )
            created: Any = self.client.json(
                "POST",
                f"repos/{repo}/issues/{number}/comments",
                ok=(201, 200),
                json={"body": body},
            )
            if not isinstance(created, dict) or not isinstance(created.get("id"), int):
                raise GitHubError("GitHub's new comment has no id")
            comment_id = str(created["id"])
        db.finish_effect(
            self.ledger,
            effect_id=effect_id,
            result_ref=comment_id,
            result={"comment_id": comment_id, "repo": repo, "issue": number},
        )
        return comment_id

    def _find_ours(self, repo: str, number: int, task_id: str) -> str | None:
        found = find_marked_comment(self.client, repo, number, marker(task_id))
        return None if found is None else str(found.get("id"))


def find_marked_comment(
    client: GitHubClient, repo: str, number: int, tag: str
) -> dict[str, Any] | None:
    """The comment on issue or PR `number` whose body carries `tag` (one of our hidden
    markers): how a write that may have landed before a crash is found again."""
    url = f"repos/{repo}/issues/{number}/comments"
    # `pages` follows next links only on the API server (the token goes with each).
    for comments in client.pages(url, params={"per_page": "100"}):
        for comment in comments:
            if isinstance(comment, dict) and tag in str(comment.get("body", "")):
                return comment
    return None
