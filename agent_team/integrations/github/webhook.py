"""`POST /github/webhook`: signed issue events feed the same intake path as the poller.

Pull request events (`pull_request`, `pull_request_review`,
`pull_request_review_comment`, and `issue_comment` on a PR) only say "look at
this PR now": the PR gate's watcher reads it from GitHub and acts on what it
reads (`pr_watch.PullRequestWatcher.check`), never on the delivery's body.

Order matters: the signature is checked on the raw body before
anything is parsed or stored; with no secret configured every request gets
503 (we cannot tell GitHub from anyone else). Only then is the delivery id
claimed in the ledger, so a redelivery (GitHub keeps the id) is answered
`{"duplicate": true}` and changes nothing, across restarts too. If starting
the task fails the reply is 500 and the claim is released, so GitHub's
redelivery of that id is acted on. While the ledger cannot be written (a full
disk, a read-only mount) the reply is 503, as the dashboard API's, logged as
one line per source a minute without a traceback: an outage is not a bug.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_team import db
from agent_team.common.bounded_json import BadJson, loads_bounded
from agent_team.integrations.github.intake import (
    GitHubIntake,
    GitHubIssue,
    PollReport,
    issue_source,
)
from agent_team.integrations.github.pr_watch import PullRequestWatcher
from agent_team.integrations.refusals import RefusalLog, outage_reason

__all__ = ["MAX_BODY_BYTES", "WebhookHandler", "WebhookReply", "sign", "verify_signature"]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB
DELIVERY_SOURCE = "github"


def sign(secret: str | bytes, body: bytes) -> str:
    """The `X-Hub-Signature-256` value GitHub sends for `body`."""
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def verify_signature(secret: str | bytes, body: bytes, header: str | None) -> bool:
    """Constant-time check of `X-Hub-Signature-256` against the raw body."""
    if not header or not header.startswith("sha256="):
        return False
    return hmac.compare_digest(
        sign(secret, body).encode("ascii"), header.strip().encode("ascii", "replace")
    )


@dataclass(frozen=True)
class WebhookReply:
    status: int
    body: dict[str, Any]


class _Repository(BaseModel):
    model_config = ConfigDict(extra="ignore")
    full_name: str


class _IssuesEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    action: str
    issue: GitHubIssue
    repository: _Repository
    label: dict[str, Any] | None = None


class _Numbered(BaseModel):
    model_config = ConfigDict(extra="ignore")
    number: int
    pull_request: dict[str, Any] | None = None  # on an issue: set when it is a PR


class _PullEvent(BaseModel):
    """The part of a PR event the watcher needs: which PR of which repository."""

    model_config = ConfigDict(extra="ignore")
    repository: _Repository
    pull_request: _Numbered | None = None
    issue: _Numbered | None = None

    def number(self) -> int | None:
        if self.pull_request is not None:
            return self.pull_request.number
        if self.issue is not None and self.issue.pull_request is not None:
            return self.issue.number
        return None


PULL_EVENTS = frozenset(
    {"pull_request", "pull_request_review", "pull_request_review_comment", "issue_comment"}
)
# CI events name a commit: the watcher looks at the PRs whose head it is.
CI_EVENTS = {
    "check_run": ("check_run", "head_sha"),
    "check_suite": ("check_suite", "head_sha"),
    "workflow_run": ("workflow_run", "head_sha"),
    "status": (None, "sha"),
}


class _CiEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    repository: _Repository
    sha: str | None = None
    check_run: dict[str, Any] | None = None
    check_suite: dict[str, Any] | None = None
    workflow_run: dict[str, Any] | None = None

    def head(self, event: str) -> str | None:
        holder, key = CI_EVENTS[event]
        source = getattr(self, holder) if holder else {"sha": self.sha}
        value = (source or {}).get(key)
        return value if isinstance(value, str) and len(value) == 40 else None


_M = TypeVar("_M", bound=BaseModel)


def _validated(model: type[_M], payload: Any, event: str, delivery: str) -> _M | WebhookReply:
    """The event's payload as `model`, or the 400 naming the fields it got wrong."""
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        fields = ", ".join(".".join(map(str, e["loc"])) or "body" for e in exc.errors())
        log.warning("github webhook: delivery %s is malformed (bad %s); ignored", delivery, fields)
        return WebhookReply(400, {"error": f"malformed {event} event: bad {fields}"})


class WebhookHandler:
    """Turns one webhook request into a reply; thin: verify, de-dup, validate, ingest."""

    def __init__(
        self, intake: GitHubIntake, secret: str | None, *, watcher: PullRequestWatcher | None = None
    ) -> None:
        self.intake = intake
        self.secret = secret
        self.watcher = watcher
        # Anyone can post here: a refusal is one short line per source a minute, no body.
        self.refusals = RefusalLog(log, "github webhook")
        # A ledger that cannot be written: 503, and as bounded a log as a refusal's.
        self.outages = RefusalLog(log, "github webhook", level=logging.ERROR)

    def handle(
        self, headers: Mapping[str, str], body: bytes, source: str | None = None
    ) -> WebhookReply:
        """One delivery's reply; `source` (the peer's address) only names it in a refusal."""
        if not self.secret:
            return WebhookReply(
                503,
                {"error": "webhook secret not configured; set AGENT_TEAM_GITHUB_WEBHOOK_SECRET"},
            )
        signature = headers.get("x-hub-signature-256")
        if not verify_signature(self.secret, body, signature):
            self.refusals.refused(source, "bad signature" if signature else "no signature")
            return WebhookReply(401, {"error": "bad signature"})
        event = headers.get("x-github-event", "")
        delivery = headers.get("x-github-delivery", "").strip()
        if not delivery or len(delivery) > 200:
            return WebhookReply(400, {"error": "missing X-GitHub-Delivery"})
        try:
            payload = loads_bounded(body)
        except BadJson as exc:
            log.warning("github webhook: delivery %r refused: %s", delivery[:80], exc)
            return WebhookReply(400, {"error": f"body refused: {exc}"})
        if event == "ping":
            return WebhookReply(200, {"ok": True, "pong": True})
        if event in PULL_EVENTS:
            return self._pull_event(event, payload, delivery)
        if event in CI_EVENTS:
            return self._ci_event(event, payload, delivery)
        if event != "issues":
            return WebhookReply(202, {"ignored": f"event {event or '(none)'}"})
        parsed = _validated(_IssuesEvent, payload, event, delivery)
        if isinstance(parsed, WebhookReply):
            return parsed
        if not db.claim_event(self.intake.ledger, source=DELIVERY_SOURCE, event_id=delivery):
            return WebhookReply(200, {"duplicate": True})
        try:
            reply = self._issues(parsed, delivery)
        except BaseException:
            self._release(delivery)
            raise
        if reply.status >= 500:
            self._release(delivery)  # GitHub's redelivery keeps the id: let it through
        return reply

    def _pull_event(self, event: str, payload: Any, delivery: str) -> WebhookReply:
        if self.watcher is None:
            return WebhookReply(202, {"ignored": "the pull request gate is off"})
        parsed = _validated(_PullEvent, payload, event, delivery)
        if isinstance(parsed, WebhookReply):
            return parsed
        repo = parsed.repository.full_name
        number = parsed.number()
        if number is None:
            return WebhookReply(202, {"ignored": "not about a pull request"})
        unwatched = self._unwatched(repo, delivery)
        if unwatched is not None:
            return unwatched
        if db.find_pull_request(self.intake.ledger, repo, number) is None:
            log.info("github webhook: %s#%d belongs to no task; ignored", repo, number)
            return WebhookReply(202, {"ignored": "no task owns this pull request"})
        return self._look(delivery, lambda watcher: watcher.check(repo, number))

    def _ci_event(self, event: str, payload: Any, delivery: str) -> WebhookReply:
        if self.watcher is None:
            return WebhookReply(202, {"ignored": "the pull request gate is off"})
        parsed = _validated(_CiEvent, payload, event, delivery)
        if isinstance(parsed, WebhookReply):
            return parsed
        repo, head = parsed.repository.full_name, parsed.head(event)
        unwatched = self._unwatched(repo, delivery)
        if unwatched is not None:
            return unwatched
        if head is None:
            return WebhookReply(202, {"ignored": "names no commit"})
        if not db.pull_requests_at(self.intake.ledger, repo, head):
            return WebhookReply(202, {"ignored": "no task's pull request has this head"})
        return self._look(delivery, lambda watcher: watcher.check_head(repo, head))

    def _look(self, delivery: str, look: Callable[[PullRequestWatcher], str]) -> WebhookReply:
        """Claim the delivery, then have the watcher read GitHub; a failure frees the claim."""
        assert self.watcher is not None
        if not db.claim_event(self.intake.ledger, source=DELIVERY_SOURCE, event_id=delivery):
            return WebhookReply(200, {"duplicate": True})
        try:
            what = look(self.watcher)
        except BaseException:
            self._release(delivery)
            raise
        return WebhookReply(200, {"pull_request": what})

    def _count(self, repo: str, kind: str, created: int) -> None:
        # `intake status` counts every task intake made, not only the poller's.
        try:
            db.count_tasks_created(
                self.intake.ledger,
                source=issue_source(repo),
                label=self.intake.label_for(kind),
                count=created,
            )
        except Exception as exc:  # a counter never fails a task that was made
            log.warning("github webhook: could not count a task for %s: %s", repo, exc)

    def _release(self, delivery: str) -> None:
        try:
            db.release_event(self.intake.ledger, source=DELIVERY_SOURCE, event_id=delivery)
        except Exception as exc:  # the reply is an error already; the poller still retries
            log.warning("github webhook: could not release delivery %s: %s", delivery, exc)

    def _unwatched(self, full_name: str, delivery: str) -> WebhookReply | None:
        """The reply to an event of a repository not in AGENT_TEAM_GITHUB_REPOS, else None."""
        if full_name.lower() in self.intake.repos:
            return None
        log.warning(
            "github webhook: delivery %s is for %s, which is not in AGENT_TEAM_GITHUB_REPOS; "
            "ignored",
            delivery,
            full_name,
        )
        return WebhookReply(202, {"ignored": "repository not configured"})

    def _issues(self, event: _IssuesEvent, delivery: str) -> WebhookReply:
        unwatched = self._unwatched(event.repository.full_name, delivery)
        if unwatched is not None:
            return unwatched
        repo = self.intake.repos[event.repository.full_name.lower()]
        if event.action not in ("opened", "labeled", "reopened"):
            return WebhookReply(202, {"ignored": f"action {event.action}"})
        issue = event.issue
        if issue.pull_request is not None or issue.state != "open":
            return WebhookReply(202, {"ignored": "not an open issue"})
        kind = self.intake.kind_for(issue.label_names())
        if kind is None:
            return WebhookReply(202, {"ignored": "not labelled for agent-team"})
        report = PollReport()
        self.intake.ingest_issue(repo, issue, kind, report)
        if report.tasks_created:
            self._count(repo, kind, report.tasks_created)
        if report.errors:
            # The poller retries it (the claim was released); tell GitHub it failed.
            return WebhookReply(500, {"error": "could not start the task; the poller retries"})
        return WebhookReply(
            201 if report.tasks_created else 200, {"created": bool(report.tasks_created)}
        )

    async def endpoint(self, request: Request) -> Response:
        """The Starlette endpoint: read the raw body, handle it on a worker thread."""
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
            return JSONResponse({"error": "payload too large"}, status_code=413)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():  # bounded even without a Content-Length
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return JSONResponse({"error": "payload too large"}, status_code=413)
            chunks.append(chunk)
        body = b"".join(chunks)
        headers = {key.lower(): value for key, value in request.headers.items()}
        source = request.client.host if request.client else None
        reply = await run_in_threadpool(self.reply_to, headers, body, source)
        return JSONResponse(reply.body, status_code=reply.status)

    def reply_to(
        self, headers: Mapping[str, str], body: bytes, source: str | None = None
    ) -> WebhookReply:
        """`handle`; what it raises as a reply: 503 if the ledger cannot be written, else 500."""
        try:
            return self.handle(headers, body, source)
        except Exception as exc:
            if db.is_outage(exc):
                self.outages.refused(source, outage_reason(exc, "GitHub"))
                return WebhookReply(503, {"error": "the ledger is unavailable; deliver it again"})
            log.exception("github webhook: handling a delivery failed")
            return WebhookReply(500, {"error": "internal error; see the daemon's log"})

    def route(self) -> Route:
        return Route("/github/webhook", self.endpoint, methods=["POST"])
