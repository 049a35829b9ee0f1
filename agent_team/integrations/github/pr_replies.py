"""What the agent writes on its pull request after a review round (issue #29).

After the follow-up commit the agent replies on each review thread it
addressed, resolves those threads, posts a summary, re-requests review, and
later marks the draft ready. Each write is an effect (docs/architecture.md §1,
§4) under an id the caller derives from the task and the round, so a node
re-run after `kill -9` repeats nothing:

- `done`: the recorded result comes back and nothing is asked of GitHub;
- `pending` with `posting` set (the call may have landed before the crash):
  GitHub is looked at first. A reply or a comment carries a hidden marker
  naming its effect (`status.marker`), searched for before posting again; a
  thread is resolved only if GitHub says it is not; a review request is sent
  again only for someone not already asked; a pull request already out of
  draft is not marked again.

Resolving a thread and marking ready exist only in GraphQL; the rest is REST.
Replies are filed by GitHub in threads by their first comment, so a thread
is named by that comment's REST id (`databaseId` in GraphQL).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from agent_team import db
from agent_team.integrations.github.intake import GitHubClient, GitHubError
from agent_team.integrations.github.pulls import PullRequests
from agent_team.integrations.github.status import find_marked_comment, marker
from agent_team.integrations.github.wire import Wire, checked

__all__ = ["PullRequestWrites"]

log = logging.getLogger(__name__)

# (result_ref, result) as `side_effects` keeps them.
_Outcome = tuple[str | None, dict[str, Any]]

_THREADS = """
query ReviewThreads($owner: String!, $name: String!, $number: Int!, $cursor: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $cursor) {
        nodes { id isResolved comments(first: 1) { nodes { databaseId } } }
        pageInfo { hasNextPage endCursor }
      }
    }
  }
}
"""
_RESOLVE = """
mutation ResolveThread($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) { thread { id isResolved } }
}
"""
_READY = """
mutation MarkReady($id: ID!) {
  markPullRequestReadyForReview(input: {pullRequestId: $id}) { pullRequest { id isDraft } }
}
"""
_IS_DRAFT = """
query IsDraft($id: ID!) { node(id: $id) { ... on PullRequest { isDraft } } }
"""


class _Posted(Wire):
    id: int


class _Login(Wire):
    login: str


class _Authored(Wire):
    user: _Login


class _Requested(Wire):
    users: list[_Login]


class _FirstComment(Wire):
    databaseId: int | None = None  # GitHub's null for a comment it cannot show


class _FirstComments(Wire):
    nodes: list[_FirstComment | None]


class _Thread(Wire):
    id: str
    isResolved: bool
    comments: _FirstComments


class _PageInfo(Wire):
    hasNextPage: bool
    endCursor: str | None = None


class _Threads(Wire):
    nodes: list[_Thread | None]
    pageInfo: _PageInfo


class _PullThreads(Wire):
    reviewThreads: _Threads


class _RepoThreads(Wire):
    pullRequest: _PullThreads


class _ThreadsData(Wire):
    repository: _RepoThreads


class _ResolvedThread(Wire):
    id: str
    isResolved: bool


class _Resolve(Wire):
    thread: _ResolvedThread


class _ResolveData(Wire):
    resolveReviewThread: _Resolve


class _Draft(Wire):
    isDraft: bool


class _Ready(Wire):
    pullRequest: _Draft


class _ReadyData(Wire):
    markPullRequestReadyForReview: _Ready


class _NodeData(Wire):
    node: _Draft


def _with_marker(body: str, effect_id: str) -> str:
    # On a line of its own: an HTML block, hidden, whatever the id holds.
    return f"{body.rstrip()}\n\n{marker(effect_id)}"


class PullRequestWrites:
    """The agent's writes on a pull request, each once, whatever crashes in between.

    Args:
        client: the daemon's GitHub client.
        ledger: the process's ledger (the composition root's), where the effects live.
    """

    def __init__(self, client: GitHubClient, ledger: db.Ledger) -> None:
        self.client = client
        self.ledger = ledger

    def reply(
        self, task_id: str, repo: str, number: int, comment_id: int, body: str, *, effect_id: str
    ) -> int:
        """Reply in the review thread that `comment_id` starts; the reply's id.

        Raises:
            GitHubError: GitHub refused (404: the comment is gone) or answered malformed.
        """
        tag = marker(effect_id)

        def find() -> _Outcome | None:
            for comment in PullRequests(self.client).review_comments(repo, number):
                if tag in comment.body:
                    return str(comment.id), {"reply_id": comment.id}
            return None

        def post() -> _Outcome:
            created = self.client.json(
                "POST",
                f"repos/{repo}/pulls/{number}/comments/{comment_id}/replies",
                ok=(201,),
                json={"body": _with_marker(body, effect_id)},
            )
            reply_id = checked(_Posted, created, f"reply on {repo}#{number}").id
            log.info("github: replied on %s#%d to comment %d", repo, number, comment_id)
            return str(reply_id), {"reply_id": reply_id}

        request = {"repo": repo, "pull": number, "comment_id": comment_id}
        ref, _ = self._once(task_id, effect_id, "github_review_reply", request, post, find)
        assert ref is not None  # a reply always has an id
        return int(ref)

    def resolve_thread(
        self, task_id: str, repo: str, number: int, comment_id: int, *, effect_id: str
    ) -> str | None:
        """Resolve the thread `comment_id` starts; its GraphQL id, None if there is none.

        The look-up comes first every time, so an already resolved thread (by a
        person, or by us before a crash) costs no mutation.
        """

        def post() -> _Outcome:
            found = self._thread(repo, number, comment_id)
            if found is None:
                log.info("github: %s#%d has no thread of comment %d", repo, number, comment_id)
                return None, {"thread_id": None}
            if not found.isResolved:
                data = self.client.graphql(_RESOLVE, {"threadId": found.id})
                done = checked(_ResolveData, data, "resolveReviewThread answer")
                if not done.resolveReviewThread.thread.isResolved:
                    raise GitHubError(f"GitHub left thread {found.id} on {repo}#{number} open")
                log.info("github: resolved thread %s on %s#%d", found.id, repo, number)
            return found.id, {"thread_id": found.id}

        request = {"repo": repo, "pull": number, "comment_id": comment_id}
        ref, _ = self._once(task_id, effect_id, "github_thread_resolve", request, post)
        return ref

    def comment(self, task_id: str, repo: str, number: int, body: str, *, effect_id: str) -> int:
        """Post a comment on the pull request's conversation; its id."""
        tag = marker(effect_id)

        def find() -> _Outcome | None:
            item = find_marked_comment(self.client, repo, number, tag)
            if item is None:
                return None
            found = checked(_Posted, item, f"comment on {repo}#{number}").id
            return str(found), {"comment_id": found}

        def post() -> _Outcome:
            created = self.client.json(
                "POST",
                f"repos/{repo}/issues/{number}/comments",
                ok=(201,),
                json={"body": _with_marker(body, effect_id)},
            )
            comment_id = checked(_Posted, created, f"comment on {repo}#{number}").id
            log.info("github: commented on %s#%d", repo, number)
            return str(comment_id), {"comment_id": comment_id}

        request = {"repo": repo, "pull": number}
        ref, _ = self._once(task_id, effect_id, "github_pr_comment", request, post, find)
        assert ref is not None
        return int(ref)

    def request_review(
        self,
        task_id: str,
        repo: str,
        number: int,
        reviewers: Sequence[str],
        *,
        effect_id: str,
        author: str | None = None,
    ) -> None:
        """Ask `reviewers` to review again; nothing to ask, nothing done.

        GitHub refuses a request naming the pull request's author (422), all of
        it, so the author is left out: `author` if the caller knows it, else
        learned from the pull request after such a refusal, and the rest asked
        again. Any other 422 (someone not a collaborator) is logged and recorded,
        never a failure: a review round is not worth failing over a notification.
        """
        logins = list(dict.fromkeys(r for r in reviewers if r))
        if author is not None:
            logins = [r for r in logins if r.lower() != author.lower()]
        if not logins:
            return
        url = f"repos/{repo}/pulls/{number}/requested_reviewers"

        def find() -> _Outcome | None:
            asked = checked(_Requested, self.client.json("GET", url), "requested_reviewers")
            waiting = {user.login.lower() for user in asked.users}
            if all(login.lower() in waiting for login in logins):
                return None, {"requested": logins}
            return None

        def post() -> _Outcome:
            asking = logins
            refused = self._ask(url, asking)
            if refused is not None and author is None:
                owner = self._author(repo, number).lower()
                if any(login.lower() == owner for login in asking):
                    asking = [login for login in asking if login.lower() != owner]
                    refused = self._ask(url, asking) if asking else None
            if refused is not None:
                message = self.client.clean(str(refused))
                log.warning("github: review not requested on %s#%d: %s", repo, number, message)
                return None, {"requested": [], "refused": message}
            if asking:
                log.info("github: asked %s to review %s#%d", ", ".join(asking), repo, number)
            return None, {"requested": asking}

        request = {"repo": repo, "pull": number, "reviewers": logins}
        self._once(task_id, effect_id, "github_review_request", request, post, find)

    def mark_ready(
        self, task_id: str, repo: str, number: int, node_id: str, *, effect_id: str
    ) -> None:
        """Take the draft out of draft (`node_id`: the pull request's GraphQL id)."""

        def find() -> _Outcome | None:
            data = self.client.graphql(_IS_DRAFT, {"id": node_id})
            if checked(_NodeData, data, f"pull request {repo}#{number}").node.isDraft:
                return None
            return node_id, {"ready": True}

        def post() -> _Outcome:
            data = self.client.graphql(_READY, {"id": node_id})
            ready = checked(_ReadyData, data, "markPullRequestReadyForReview answer")
            if ready.markPullRequestReadyForReview.pullRequest.isDraft:
                raise GitHubError(f"GitHub left {repo}#{number} a draft")
            log.info("github: %s#%d is ready for review", repo, number)
            return node_id, {"ready": True}

        request = {"repo": repo, "pull": number, "node_id": node_id}
        self._once(task_id, effect_id, "github_pr_ready", request, post, find)

    # -- the effect around each write ----------------------------------------------------

    def _once(
        self,
        task_id: str,
        effect_id: str,
        kind: str,
        request: dict[str, Any],
        post: Callable[[], _Outcome],
        find: Callable[[], _Outcome | None] | None = None,
    ) -> _Outcome:
        """Run `post` once for `effect_id`: the recorded outcome when done; after a crash
        that may have posted (`posting` recorded), what `find` sees on GitHub first."""
        effect = db.begin_effect(
            self.ledger, effect_id=effect_id, task_id=task_id, kind=kind, request=request
        )
        if effect.state == "done":
            recorded = effect.result if isinstance(effect.result, dict) else {}
            return effect.result_ref, recorded
        recorded_request = effect.request if isinstance(effect.request, dict) else {}
        found = find() if find is not None and recorded_request.get("posting") else None
        if found is None:
            db.finish_effect(
                self.ledger,
                effect_id=effect_id,
                state="pending",
                request={**request, "posting": True},
            )
            found = post()
        ref, result = found
        db.finish_effect(self.ledger, effect_id=effect_id, result_ref=ref, result=result)
        return found

    def _ask(self, url: str, logins: list[str]) -> GitHubError | None:
        """Request reviews; GitHub's 422 comes back instead of being raised."""
        try:
            self.client.json("POST", url, ok=(201,), json={"reviewers": logins})
        except GitHubError as exc:
            if exc.status != 422:
                raise
            return exc
        return None

    def _author(self, repo: str, number: int) -> str:
        pull = self.client.json("GET", f"repos/{repo}/pulls/{number}")
        return checked(_Authored, pull, f"pull request {repo}#{number}").user.login

    def _thread(self, repo: str, number: int, comment_id: int) -> _Thread | None:
        """The review thread whose first comment is `comment_id`, every page looked at."""
        owner, _, name = repo.partition("/")
        cursor: str | None = None
        while True:
            data = self.client.graphql(
                _THREADS, {"owner": owner, "name": name, "number": number, "cursor": cursor}
            )
            page = checked(_ThreadsData, data, f"review threads of {repo}#{number}")
            threads = page.repository.pullRequest.reviewThreads
            for thread in threads.nodes:
                first = thread.comments.nodes[0] if thread and thread.comments.nodes else None
                if thread is not None and first is not None and first.databaseId == comment_id:
                    return thread
            if not threads.pageInfo.hasNextPage:
                return None
            if not threads.pageInfo.endCursor:
                raise GitHubError(f"GitHub said more threads of {repo}#{number} follow, no cursor")
            cursor = threads.pageInfo.endCursor
