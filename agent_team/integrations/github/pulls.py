"""What GitHub says about a task's pull request: its state, its reviews and comments, its CI.

The first piece of the loop after the pull request (issue #29): the PR gate and
the CI watcher read a pull request through this, never through raw JSON. Every
reply is validated into a small frozen record (external input: a field that is
missing or of the wrong type is a `GitHubError` naming it, never a KeyError
deep in a node), and the wire's quirks are handled once, here:

- the PR list carries no `merged`; one PR's `GET` does, so the state comes
  from `GET pulls/{n}`, with its ETag (a 304 costs no rate limit);
- a review's state is upper case in REST (`CHANGES_REQUESTED`) and lower case
  in webhooks; records hold the upper-case form;
- the first comment of a review thread has no `in_reply_to_id` at all;
- check runs, check suites, workflow runs and jobs come as wrapped lists
  (`{"total_count": n, "<key>": [...]}`), paged by `Link` like the plain ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from agent_team.integrations.github.intake import GitHubClient, GitHubError
from agent_team.integrations.github.wire import Wire, checked

__all__ = [
    "CheckRun",
    "PullRequests",
    "PullState",
    "Review",
    "ReviewComment",
]

Outcome = Literal["open", "merged", "closed"]


class _User(Wire):
    login: str


class _Ref(Wire):
    ref: str
    sha: str


class _Pull(Wire):
    number: int
    node_id: str
    state: Literal["open", "closed"]
    merged: bool = False
    draft: bool = False
    html_url: str
    head: _Ref
    base: _Ref


class _Review(Wire):
    id: int
    node_id: str
    user: _User | None = None  # a deleted account's review has no user
    state: str
    body: str | None = None
    commit_id: str | None = None
    submitted_at: str | None = None


class _ReviewComment(Wire):
    id: int
    node_id: str
    user: _User | None = None
    path: str
    line: int | None = None
    body: str
    commit_id: str
    in_reply_to_id: int | None = None  # absent on a thread's first comment
    pull_request_review_id: int | None = None


class _Suite(Wire):
    id: int


class _App(Wire):
    slug: str | None = None


class _CheckRun(Wire):
    id: int
    name: str
    status: str
    conclusion: str | None = None
    head_sha: str
    details_url: str | None = None
    check_suite: _Suite | None = None  # nullable in GitHub's schema
    app: _App | None = None


@dataclass(frozen=True, slots=True)
class PullState:
    """One pull request as `GET pulls/{n}` tells it."""

    number: int
    node_id: str  # for GraphQL (`markPullRequestReadyForReview`)
    state: Literal["open", "closed"]
    merged: bool
    draft: bool
    url: str
    head_ref: str
    head_sha: str
    base_ref: str
    base_sha: str  # the base branch's head as GitHub last compared the PR to it

    @property
    def outcome(self) -> Outcome:
        """`merged` and `closed` end a task's PR gate; `open` keeps it waiting."""
        if self.merged:
            return "merged"
        return "closed" if self.state == "closed" else "open"


@dataclass(frozen=True, slots=True)
class Review:
    id: int
    node_id: str
    user: str | None
    state: str  # APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED, PENDING
    body: str
    commit_id: str | None
    submitted_at: str | None


@dataclass(frozen=True, slots=True)
class ReviewComment:
    id: int
    node_id: str
    user: str | None
    path: str
    line: int | None
    body: str
    commit_id: str
    in_reply_to_id: int | None
    review_id: int | None

    @property
    def starts_thread(self) -> bool:
        return self.in_reply_to_id is None


@dataclass(frozen=True, slots=True)
class CheckRun:
    id: int
    name: str
    status: str  # queued, in_progress, completed, ...
    conclusion: str | None  # success, failure, timed_out, cancelled, ... once completed
    head_sha: str
    details_url: str | None
    suite_id: int | None = None  # an Actions job's suite is its workflow run's
    app: str | None = None  # the reporting app's slug (`github-actions`)

    @property
    def failed(self) -> bool:
        return self.status == "completed" and self.conclusion in (
            "failure",
            "timed_out",
            "startup_failure",
        )


class PullRequests:
    """Reads one repository's pull requests through the daemon's `GitHubClient`."""

    def __init__(self, client: GitHubClient) -> None:
        self.client = client

    def get(
        self, repo: str, number: int, *, etag: str | None = None
    ) -> tuple[PullState | None, str | None]:
        """The pull request and its ETag; `(None, etag)` when unchanged since `etag` (304).

        Raises:
            GitHubError: an error status (404: no such PR) or a malformed reply.
        """
        headers = {"If-None-Match": etag} if etag else {}
        response = self.client.request("GET", f"repos/{repo}/pulls/{number}", headers=headers)
        if response.status_code == 304:
            return None, etag
        if response.status_code != 200:
            raise GitHubError(
                self.client.describe(response),
                status=response.status_code,
                headers=response.headers,
            )
        try:
            data = response.json()
        except ValueError:
            raise GitHubError(f"GitHub sent malformed JSON for pull {repo}#{number}") from None
        pull = checked(_Pull, data, f"pull request {repo}#{number}")
        state = PullState(
            number=pull.number,
            node_id=pull.node_id,
            state=pull.state,
            merged=pull.merged,
            draft=pull.draft,
            url=pull.html_url,
            head_ref=pull.head.ref,
            head_sha=pull.head.sha,
            base_ref=pull.base.ref,
            base_sha=pull.base.sha,
        )
        return state, response.headers.get("etag")

    def reviews(self, repo: str, number: int) -> list[Review]:
        """Every review of the pull request, oldest first."""
        found = []
        for page in self.client.pages(f"repos/{repo}/pulls/{number}/reviews"):
            for item in page:
                review = checked(_Review, item, f"review on {repo}#{number}")
                found.append(
                    Review(
                        id=review.id,
                        node_id=review.node_id,
                        user=review.user.login if review.user else None,
                        state=review.state.upper(),
                        body=review.body or "",
                        commit_id=review.commit_id,
                        submitted_at=review.submitted_at,
                    )
                )
        return found

    def review_comments(self, repo: str, number: int) -> list[ReviewComment]:
        """Every review comment (inline, on a line of the diff), oldest first."""
        found = []
        for page in self.client.pages(f"repos/{repo}/pulls/{number}/comments"):
            for item in page:
                comment = checked(_ReviewComment, item, f"review comment on {repo}#{number}")
                found.append(
                    ReviewComment(
                        id=comment.id,
                        node_id=comment.node_id,
                        user=comment.user.login if comment.user else None,
                        path=comment.path,
                        line=comment.line,
                        body=comment.body,
                        commit_id=comment.commit_id,
                        in_reply_to_id=comment.in_reply_to_id,
                        review_id=comment.pull_request_review_id,
                    )
                )
        return found

    def check_runs(self, repo: str, sha: str) -> list[CheckRun]:
        """The latest check run of each check on a commit (GitHub's default `filter=latest`)."""
        runs = []
        for item in self._wrapped(f"repos/{repo}/commits/{sha}/check-runs", "check_runs"):
            run = checked(_CheckRun, item, f"check run on {repo}@{sha[:12]}")
            runs.append(
                CheckRun(
                    id=run.id,
                    name=run.name,
                    status=run.status,
                    conclusion=run.conclusion,
                    head_sha=run.head_sha,
                    details_url=run.details_url,
                    suite_id=run.check_suite.id if run.check_suite else None,
                    app=run.app.slug if run.app else None,
                )
            )
        return runs

    def _wrapped(self, url: str, key: str) -> Iterator[Any]:
        """The items of a wrapped list endpoint, every page."""
        for page in self.client.pages(url, params={"per_page": "100"}, key=key):
            yield from page
