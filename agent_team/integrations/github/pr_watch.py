"""The PR gate's answerer: reads a task's pull request and answers with what happened.

A task whose draft PR is open waits on a `pull_request` question
(`nodes.pull_request.pr_gate`). This watcher is the only thing that answers it:

- merged or closed on GitHub -> `merged` / `closed`, and the task ends;
- a review that requests changes or says something, a review comment, or a PR
  comment that mentions the bot's handle (`AGENT_TEAM_GITHUB_HANDLE`) or starts
  with `/agent-team fix` (or seed 004's `/fix-review`), by a login on
  `AGENT_TEAM_GITHUB_REVIEWERS`, on the PR's head commit -> `feedback`, and
  the agent makes one follow-up commit.

With no feedback to act on, CI on the head is watched (`ci_watch.CiWatch`): a
flaky failure is rerun once per head, a red head answers the gate `ci_failed`
so a person decides, a green one may mark the draft ready.

It runs from the `github-pulls` loop (each watched PR every
`AGENT_TEAM_GITHUB_PR_POLL_S`, with the PR's ETag, so an unchanged PR costs a
304) and from the webhook, which only says "look at this PR now": what GitHub
says on a second read is the truth, never the delivery's body. Both may look
at once, and on several daemons: the answer names the events it acts on
(`review:<id>`, `review_comment:<id>`, `comment:<id>`, `pr:merged`) and goes
through `TaskRequests.answer`, whose compare-and-set stores them with the
answer, so each event is acted on once and a poller racing a webhook is a no-op.

What is ignored is logged once per event and process, and nothing is stored:
a login not on the list, a review of a commit that is no longer the head, the
agent's own comments (they carry `MARKER`).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_team import db
from agent_team.exceptions import AccessDeniedError, InvalidAnswerError, QuestionClosedError
from agent_team.integrations.github.ci_watch import CiWatch
from agent_team.integrations.github.intake import GitHubClient, GitHubError
from agent_team.integrations.github.pulls import PullRequests, PullState
from agent_team.integrations.github.wire import Wire, checked
from agent_team.requests.actors import Actor
from agent_team.requests.roles import allowed, authorize
from agent_team.requests.task_requests import TaskRequests
from agent_team.task_model import QuestionKind

__all__ = ["FIX_COMMANDS", "MARKER", "PullRequestWatcher", "WatchReport"]

log = logging.getLogger(__name__)

# Every comment the agent writes carries this, so it never answers itself.
MARKER = "<!-- agent-team"
FIX_COMMANDS = ("/agent-team fix", "/fix-review")
# A review or comment longer than this is cut for the follow-up's instructions.
BODY_CHARS = 4000
MAX_ITEMS = 50
_ANSWER_ACTION = f"answer:{QuestionKind.PULL_REQUEST.value}"  # what a reviewer's feedback does
# A 304 says the PR itself is unchanged; reviews and comments are read again at least
# this often anyway, in case a new one did not move the PR's own ETag.
FULL_READ_EVERY_S = 300.0


class _IssueComment(Wire):
    class _User(Wire):
        login: str

    id: int
    body: str | None = None
    user: _User | None = None
    html_url: str | None = None


@dataclass
class WatchReport:
    """One pass: how many PRs were read, unchanged (304), answered; errors by PR."""

    checked: int = 0
    unchanged: int = 0
    answered: int = 0
    errors: list[str] = field(default_factory=list)


class PullRequestWatcher:
    """Reads watched PRs and answers their gates.

    Args:
        client: the GitHub client (the integration's).
        ledger: the process's ledger.
        requests: where answers go (the coordinator's `TaskRequests`).
        reviewers: logins whose feedback is acted on (case-insensitive); empty: nobody's.
        handle: the mention that asks for a follow-up in a PR comment (`@agent-team`).
        clock: the coordinator's clock.
    """

    def __init__(
        self,
        client: GitHubClient,
        ledger: db.Ledger,
        requests: TaskRequests,
        *,
        reviewers: Sequence[str],
        handle: str,
        clock: Callable[[], datetime],
        ci: CiWatch | None = None,
    ) -> None:
        self.client = client
        self.ci = ci
        self.pulls = PullRequests(client)
        self.ledger = ledger
        self.requests = requests
        self.reviewers = {login.lower() for login in reviewers}
        self.handle = handle.lower()
        self.clock = clock
        self._told: set[str] = set()  # ignored events already logged by this process
        self._told_lock = threading.Lock()
        self._full_read: dict[str, datetime] = {}  # task -> last read without an ETag
        # task -> (ETag, the PR) as this process last read it (a 304 reuses it)
        self._states: dict[str, tuple[str | None, PullState]] = {}

    # -- passes ---------------------------------------------------------------------------

    def poll_once(self) -> WatchReport:
        """Look at every watched PR once, the least recently checked first."""
        report = WatchReport()
        for watched in db.watched_pull_requests(self.ledger):
            self._check_into(watched, report, fresh=False)
        return report

    def check_head(self, repo: str, sha: str) -> str:
        """Look now at the PRs whose head is `sha` (a CI webhook names a commit, not a PR)."""
        found = [
            self.check(repo, pull.number) for pull in db.pull_requests_at(self.ledger, repo, sha)
        ]
        return "; ".join(found) or "no task's pull request has this head"

    def check(self, repo: str, number: int) -> str:
        """Look at one PR now, ignoring its ETag (a webhook said it changed).

        Returns:
            What happened, for the webhook's reply and its log line.
        """
        row = db.find_pull_request(self.ledger, repo, number)
        if row is None:
            return "no task owns this pull request"
        watched = next(
            (w for w in db.watched_pull_requests(self.ledger) if w.pull.task_id == row.task_id),
            None,
        )
        if watched is None:
            return f"task {row.task_id} is not waiting on its pull request"
        report = WatchReport()
        self._check_into(watched, report, fresh=True)
        if report.errors:
            return report.errors[0]
        return "answered" if report.answered else "nothing to act on"

    def _check_into(self, watched: db.WatchedPull, report: WatchReport, *, fresh: bool) -> None:
        pull = watched.pull
        try:
            answered = self._check(watched, fresh=fresh, report=report)
        except GitHubError as exc:
            report.errors.append(f"{pull.repo}#{pull.number}: {exc}")
            log.warning("github pulls: cannot read %s#%d: %s", pull.repo, pull.number, exc)
            return
        report.answered += int(answered)

    def _check(self, watched: db.WatchedPull, *, fresh: bool, report: WatchReport) -> bool:
        pull = watched.pull
        now = self.clock()
        last = self._full_read.get(pull.task_id)
        # The ETag sent is the one of the state this process holds, never another
        # daemon's: a 304 must mean "what *we* read is still true".
        cached = self._states.get(pull.task_id)
        if cached is None or last is None or (now - last).total_seconds() >= FULL_READ_EVERY_S:
            fresh = True
        sent = None if fresh or cached is None else cached[0]
        state, etag = self.pulls.get(pull.repo, pull.number, etag=sent)
        report.checked += 1
        changed = state is not None
        if state is None:  # 304: the PR itself is unchanged; its CI may have moved
            report.unchanged += 1
            db.note_pull_request(self.ledger, pull.task_id, checked_at=now)
            assert cached is not None
            state = cached[1]
        else:
            self._states[pull.task_id] = (etag, state)
            if fresh:
                self._full_read[pull.task_id] = now
            db.note_pull_request(
                self.ledger, pull.task_id, etag=etag, head_sha=state.head_sha, checked_at=now
            )
        if state.outcome != "open":
            ended: dict[str, Any] = {"decision": state.outcome}
            if watched.kind == "pull_request":
                ended["head_sha"] = state.head_sha
            return self._answer(
                watched,
                ended,
                [db.NewPrEvent(f"pr:{state.outcome}", state.outcome, head_sha=state.head_sha)],
                via=f"github:{pull.repo}",
            )
        if pull.hands_off or watched.kind != "pull_request":
            return False  # a person took over or decides now: only a merge or a close counts
        items = self.feedback(pull, state) if changed else []
        if not items:
            gate = self.ci.step(pull, state) if self.ci is not None else None
            if gate is None:
                return False
            return self._answer(watched, gate.answer, gate.events, via=gate.via)
        events = [
            db.NewPrEvent(
                item["key"],
                item["kind"],
                round=pull.rounds + 1,
                head_sha=state.head_sha,
                actor=item["user"],
                detail={"id": item["id"], "url": item.get("url")},
            )
            for item in items
        ]
        answer = {"decision": "feedback", "head_sha": state.head_sha, "items": items}
        return self._answer(watched, answer, events, via=f"github:{items[0]['user']}")

    def _answer(
        self,
        watched: db.WatchedPull,
        answer: dict[str, Any],
        events: list[db.NewPrEvent],
        *,
        via: str,
    ) -> bool:
        try:
            self.requests.answer(watched.question_id, answer, via=via, events=events)
        except QuestionClosedError:
            return False  # another look (a webhook, another daemon) answered first
        except AccessDeniedError as exc:  # a login whose person's role may not (audited)
            self._tell(f"denied:{via}:{watched.question_id}", f"{watched.pull.repo}: {exc}")
            return False
        except InvalidAnswerError as exc:
            log.warning(
                "github pulls: %s#%d: cannot answer the gate: %s",
                watched.pull.repo,
                watched.pull.number,
                exc,
            )
            return False
        log.info(
            "github pulls: %s#%d -> %s (%s)",
            watched.pull.repo,
            watched.pull.number,
            answer["decision"],
            ", ".join(event.event_key for event in events),
        )
        return True

    # -- what counts as feedback -----------------------------------------------------------

    def feedback(self, pull: db.PullRequestRow, state: PullState) -> list[dict[str, Any]]:
        """The new feedback items on the PR's head, oldest first, at most `MAX_ITEMS`."""
        known = db.pr_event_keys(self.ledger, pull.task_id)
        where = f"{pull.repo}#{pull.number}"
        items: list[dict[str, Any]] = []
        comments = self.pulls.review_comments(pull.repo, pull.number)
        in_review = {c.review_id for c in comments if c.review_id is not None}
        for review in self.pulls.reviews(pull.repo, pull.number):
            key = f"review:{review.id}"
            body = review.body.strip()
            wants = review.state == "CHANGES_REQUESTED" or (review.state == "COMMENTED" and body)
            if key in known or not wants or MARKER in body:
                continue
            if not self._allowed(key, where, review.user):
                continue
            if review.commit_id != state.head_sha:
                self._tell(
                    key, f"{where}: review {review.id} is of {review.commit_id}, not the head"
                )
                continue
            if not body and review.id in in_review:
                continue  # its inline comments are the feedback
            items.append(
                {
                    "key": key,
                    "kind": "review",
                    "id": review.id,
                    "user": review.user,
                    "body": (body or "changes requested")[:BODY_CHARS],
                }
            )
        for comment in comments:
            key = f"review_comment:{comment.id}"
            if key in known or MARKER in comment.body:
                continue
            if not self._allowed(key, where, comment.user):
                continue
            if comment.commit_id != state.head_sha:
                self._tell(key, f"{where}: comment {comment.id} is on an older commit")
                continue
            items.append(
                {
                    "key": key,
                    "kind": "review_comment",
                    "id": comment.id,
                    "user": comment.user,
                    "body": comment.body[:BODY_CHARS],
                    "path": comment.path,
                    "line": comment.line,
                    "thread_comment_id": comment.in_reply_to_id or comment.id,
                }
            )
        items += self._asking_comments(pull, known, where)
        return items[:MAX_ITEMS]

    def _asking_comments(
        self, pull: db.PullRequestRow, known: set[str], where: str
    ) -> list[dict[str, Any]]:
        found = []
        url = f"repos/{pull.repo}/issues/{pull.number}/comments"
        for page in self.client.pages(url, params={"per_page": "100"}):
            for raw in page:
                comment = checked(_IssueComment, raw, f"comment on {where}")
                body = (comment.body or "").strip()
                key = f"comment:{comment.id}"
                if key in known or MARKER in body or not self._asks(body):
                    continue
                user = comment.user.login if comment.user else None
                if not self._allowed(key, where, user):
                    continue
                found.append(
                    {
                        "key": key,
                        "kind": "comment",
                        "id": comment.id,
                        "user": user,
                        "body": body[:BODY_CHARS],
                        "url": comment.html_url,
                    }
                )
        return found

    def _asks(self, body: str) -> bool:
        lowered = body.lower()
        if lowered.startswith(FIX_COMMANDS):
            return True
        return bool(re.search(rf"(^|[^\w@-]){re.escape(self.handle)}(?![\w-])", lowered))

    def _allowed(self, key: str, where: str, user: str | None) -> bool:
        """On the reviewers' list and, once people decide, a login whose role may answer.

        Each item is judged by its own author (a maintainer's review must not carry a
        stranger's comment along); a refusal is audited once per item and process.
        """
        if user is None or user.lower() not in self.reviewers:
            self._tell(
                key,
                f"{where}: {key} by {user or 'a deleted account'} ignored: not on "
                "AGENT_TEAM_GITHUB_REVIEWERS",
            )
            return False
        actor = Actor(user, "github")
        if allowed(self.ledger, actor, _ANSWER_ACTION):
            return True
        with self._told_lock:
            first = f"role:{key}" not in self._told
        if first:
            try:
                authorize(self.ledger, actor, _ANSWER_ACTION, key)
            except AccessDeniedError as exc:
                self._tell(f"role:{key}", f"{where}: {key} ignored: {exc}")
        return False

    def _tell(self, key: str, line: str) -> None:
        with self._told_lock:
            if key in self._told:
                return
            self._told.add(key)
        log.info("github pulls: %s", line)
