"""GitHub issue intake: poll labelled issues (ETag, rate limits, Link pages) and start tasks.

One function turns an issue into a task, `GitHubIntake.ingest`, and both the
poller and the webhook call it. It claims `(github:owner/repo, number)` in the
ledger first (`INSERT OR IGNORE`), then starts the task under a deterministic
id, and releases the claim if starting fails, so the next poll retries
(docs/architecture.md §4). A claim whose task never appeared (the process died between
the two writes) is picked up by `sweep_claims`, which re-fetches the issue.

Polling asks for `sort=updated&direction=desc`: labelling, reopening or
editing an issue moves it to the top of page 1, so page 1's ETag answering
304 really means no labelled issue changed and the later pages need no
request. The ETag lives in the ledger (`intake_cursors`), so a restarted
daemon still gets cheap 304s. Rate limits: `x-ratelimit-remaining: 0` waits
for `x-ratelimit-reset`; a 403/429 waits `retry-after` seconds, else backs off
exponentially from 60 s. The wait is stored as the cursor's `next_poll_at`,
and a token-wide limit also pauses the other repositories and the claim sweep
in this process; a claim the sweep cannot start backs off on its own.

Tokens go only into the `Authorization` header and never into a log line or
an error message (`redact` with the token as a known secret).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_team import __version__, db
from agent_team.common.redact import redact, redact_deep
from agent_team.common.testhooks import wall_clock
from agent_team.exceptions import AgentTeamError
from agent_team.integrations.github.settings import GitHubSettings
from agent_team.requests.actors import Actor
from agent_team.requests.limits import MAX_BODY_CHARS, MAX_TITLE_CHARS
from agent_team.task_model import TaskKind

__all__ = [
    "BODY_LIMIT",
    "SOURCE",
    "GitHubClient",
    "GitHubError",
    "GitHubIntake",
    "GitHubIssue",
    "PollReport",
    "StartTask",
    "issue_source",
    "legacy_task_id_for",
    "make_client",
    "parse_issue_url",
    "task_id_for",
    "task_ids_for",
]

log = logging.getLogger(__name__)

SOURCE = "github"  # tasks.source of every GitHub task
# An issue cannot be refused, so it is cut to the task limits, the note about the cut included.
_CUT_NOTE_ROOM = 300
BODY_LIMIT = MAX_BODY_CHARS - _CUT_NOTE_ROOM
TITLE_LIMIT = MAX_TITLE_CHARS
MIN_BACKOFF_S = 60.0  # a 403/429 without retry-after waits at least this (GitHub's advice)
MAX_BACKOFF_S = 3600.0
API_VERSION = "2022-11-28"
_SAFE_ID = re.compile(r"[^a-z0-9._-]+")
_ISSUE_URL = re.compile(r"/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/issues/(\d+)/?$")

# What intake calls to start a task: Coordinator.start_task or a test double.
StartTask = Callable[..., str]


class GitHubError(AgentTeamError):
    """GitHub answered with an error or something we cannot use; the message says which."""

    def __init__(
        self, message: str, *, status: int | None = None, headers: httpx.Headers | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers  # the response's, for rate-limit and retry-after headers


def issue_source(repo: str) -> str:
    """The ledger's `source` of a repository's issues; GitHub names ignore case."""
    return f"{SOURCE}:{repo.lower()}"


def task_id_for(repo: str, number: int) -> str:
    """The deterministic task id of an issue, so racing creators make one task.

    `gh-<owner>--<repo>-<number>`, lower case. Unambiguous because GitHub owner
    names hold only letters, digits and single inner hyphens (no `--`, no
    trailing `-`), so the first `--` ends the owner; repository names (which may
    hold `--`) run from there to the last `-`.
    """
    owner, _, name = repo.lower().partition("/")
    return f"gh-{_SAFE_ID.sub('_', owner)}--{_SAFE_ID.sub('_', name)}-{number}"


def legacy_task_id_for(repo: str, number: int) -> str:
    """The id older versions gave an issue's task, still looked up for their claims.

    `gh-<owner>-<repo>-<number>`: `acme-corp/api#7` and `acme/corp-api#7` collided.
    """
    owner, _, name = repo.lower().partition("/")
    return "-".join(_SAFE_ID.sub("_", part) for part in ("gh", owner, name, str(number)))


def task_ids_for(repo: str, number: int) -> tuple[str, str]:
    """Every id an issue's task may have: the current one first, then the legacy one."""
    return task_id_for(repo, number), legacy_task_id_for(repo, number)


def parse_issue_url(url: str | None) -> tuple[str, int] | None:
    """`(owner/repo, number)` from an issue's html_url (github.com or Enterprise)."""
    if not url:
        return None
    match = _ISSUE_URL.search(httpx.URL(url).path) if "://" in url else None
    if match is None:
        return None
    return f"{match.group(1)}/{match.group(2)}", int(match.group(3))


class _Label(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str


class GitHubIssue(BaseModel):
    """The fields of a REST issue we use; anything else in the item is ignored."""

    model_config = ConfigDict(extra="ignore")

    number: int = Field(gt=0)
    title: str = Field(min_length=1)
    body: str | None = None
    html_url: str = Field(min_length=1)
    state: str = "open"
    labels: list[_Label] = Field(default_factory=list)
    pull_request: dict[str, Any] | None = None

    @field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, value: Any) -> Any:
        # Labels are objects in the REST API; webhook and older payloads may hold names.
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("title")
    @classmethod
    def _title(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    def label_names(self) -> set[str]:
        return {label.name for label in self.labels}

    def task_body(self) -> str:
        """The body kept in the task: capped, with a note saying where the rest is."""
        body = self.body or ""
        if len(body) <= BODY_LIMIT:
            return body
        return (
            body[:BODY_LIMIT] + f"\n\n[agent-team: {len(body) - BODY_LIMIT} more characters "
            f"cut; the full text is at {self.html_url}]"
        )

    def task_title(self) -> str:
        title = " ".join(self.title.split())
        return title if len(title) <= TITLE_LIMIT else title[: TITLE_LIMIT - 1] + "…"


@dataclass(frozen=True)
class _Page:
    status: int
    items: list[Any]
    etag: str | None
    next_url: str | None
    headers: httpx.Headers


class GitHubClient:
    """The REST calls agent-team makes, over one httpx client with GitHub's headers.

    Args:
        base_url: `AGENT_TEAM_GITHUB_API_URL` (Enterprise: `https://host/api/v3`).
        token: the bearer token, or None for anonymous reads.
        transport: an httpx transport (tests); None for the real network stack.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 20.0,
    ) -> None:
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": f"agent-team/{__version__}",
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._token = token
        self._options: dict[str, Any] = {
            "base_url": base_url.rstrip("/") + "/",
            "headers": headers,
            "transport": transport,
            "timeout": timeout_s,
            "follow_redirects": False,
        }
        self._guard = threading.Lock()
        self._client: httpx.Client | None = None

    @property
    def _http(self) -> httpx.Client:
        # Made on first use and again after `close()`, so a late observer call during a
        # shutdown still works (its connection is closed by the next `close()` or at exit).
        with self._guard:
            if self._client is None or self._client.is_closed:
                self._client = httpx.Client(**self._options)
            return self._client

    def close(self) -> None:
        """Close the pooled connections (the daemon's poller does this when it stops)."""
        with self._guard:
            if self._client is not None:
                self._client.close()
                self._client = None

    def clean(self, text: str) -> str:
        """`text` with the token (and anything token-shaped) removed."""
        return redact(text, [self._token])

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One call; a transport failure becomes a `GitHubError` with no secret in it.

        What we send (comments, pull request titles and bodies) goes through the one
        redaction rule first: a token pasted into a task must not land on GitHub.
        """
        if "json" in kwargs:
            kwargs["json"] = redact_deep(kwargs["json"])
        try:
            return self._http.request(
                method, url.lstrip("/") if "://" not in url else url, **kwargs
            )
        except httpx.HTTPError as exc:
            raise GitHubError(
                self.clean(
                    f"cannot reach GitHub ({type(exc).__name__}: {exc}); "
                    "check AGENT_TEAM_GITHUB_API_URL and the network"
                )
            ) from None

    def json(self, method: str, url: str, *, ok: tuple[int, ...] = (200,), **kwargs: Any) -> Any:
        """Call and decode JSON; any other status is a `GitHubError` naming it."""
        response = self.request(method, url, **kwargs)
        if response.status_code not in ok:
            raise GitHubError(
                self.describe(response), status=response.status_code, headers=response.headers
            )
        try:
            return response.json()
        except ValueError:
            raise GitHubError(
                f"GitHub answered {method} {response.request.url.path} with malformed JSON",
                status=response.status_code,
            ) from None

    def graphql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        """One GraphQL call and its `data`: resolving a thread and marking a pull
        request ready exist only there, not in REST.

        The endpoint sits beside the REST root, not under it: `https://api.github.com`
        -> `https://api.github.com/graphql`, Enterprise's `https://host/api/v3` ->
        `https://host/api/graphql`, any other base (the loopback fake) -> `<base>/graphql`.

        Raises:
            GitHubError: an error status; GraphQL `errors`, which come with a 200
                (named by the first one's type and message); or no `data` object.
        """
        base = str(self._options["base_url"]).rstrip("/")
        url = base.removesuffix("/v3") if base.endswith("/api/v3") else base
        answer = self.json("POST", f"{url}/graphql", json={"query": query, "variables": variables})
        errors = answer.get("errors") if isinstance(answer, dict) else None
        if errors:
            first = errors[0] if isinstance(errors, list) and isinstance(errors[0], dict) else {}
            extensions = first.get("extensions")
            code = extensions.get("code") if isinstance(extensions, dict) else None
            kind = first.get("type") or code or "ERROR"
            message = str(first.get("message", "no message"))[:300]
            raise GitHubError(
                self.clean(
                    f"GitHub's GraphQL API answered {kind}: {message}; check the repository, "
                    "the pull request and the token's pull_requests:write permission"
                )
            )
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, dict):
            raise GitHubError("GitHub's GraphQL API answered without a `data` object")
        return data

    def describe(self, response: httpx.Response) -> str:
        """One line for an error response: status, path and GitHub's message."""
        message = ""
        try:
            payload = response.json()
            if isinstance(payload, dict):
                message = str(payload.get("message", ""))[:300]
        except ValueError:
            message = response.text[:200]
        hint = {
            401: "; check AGENT_TEAM_GITHUB_TOKEN",
            403: "; the token lacks access or the rate limit is spent",
            404: "; check the repository name and the token's access to it",
        }.get(response.status_code, "")
        path = response.request.url.path
        return self.clean(
            f"GitHub answered {response.status_code} to {response.request.method} {path}"
            + (f": {message}" if message else "")
            + hint
        )

    def issues_page(self, url: str, *, params: dict[str, str] | None, etag: str | None) -> _Page:
        headers = {"If-None-Match": etag} if etag else {}
        response = self.request("GET", url, params=params, headers=headers)
        if response.status_code == 304:
            return _Page(304, [], etag, None, response.headers)
        items = self.json_list(response, url)
        next_url = self.next_link(response, url)
        return _Page(200, items, response.headers.get("etag"), next_url, response.headers)

    def json_list(self, response: httpx.Response, url: str, key: str | None = None) -> list[Any]:
        """The JSON list a 200 carries (with `key`: the list under that key of a wrapped
        list, `{"total_count": n, key: [...]}`, as check runs and workflow runs come).

        Raises:
            GitHubError: an error status, malformed JSON, or not a list.
        """
        if response.status_code != 200:
            raise GitHubError(
                self.describe(response), status=response.status_code, headers=response.headers
            )
        try:
            items = response.json()
        except ValueError:
            raise GitHubError(f"GitHub sent malformed JSON for {url}", status=200) from None
        if key is not None:
            items = items.get(key) if isinstance(items, dict) else None
            if not isinstance(items, list):
                raise GitHubError(f"GitHub's reply for {url} has no `{key}` list")
        if not isinstance(items, list):
            raise GitHubError(f"GitHub sent a {type(items).__name__}, not a list, for {url}")
        return items

    def next_link(self, response: httpx.Response, url: str) -> str | None:
        """The `Link: rel="next"` URL of `response`, only if it is on the API server.

        Raises:
            GitHubError: the link points at another server. The token goes with
                every request, so such a link is never followed.
        """
        next_url = response.links.get("next", {}).get("url")
        if next_url is not None and not self.same_origin(next_url):
            raise GitHubError(
                f"GitHub's next-page link for {url} points at another server; not followed"
            )
        return next_url

    def pages(
        self, url: str, *, params: dict[str, str] | None = None, key: str | None = None
    ) -> Iterator[list[Any]]:
        """Each page of a JSON list endpoint, following `Link: rel="next"` on this server only.

        `key` names the list of a wrapped list endpoint (see `json_list`).

        Raises:
            GitHubError: an error status, a body that is not a JSON list, or a
                next-page link to another server.
        """
        following: str | None = url
        while following is not None:
            response = self.request("GET", following, params=params)
            yield self.json_list(response, url, key)
            following = self.next_link(response, url)
            params = None  # the link carries the query

    def same_origin(self, url: str) -> bool:
        """True if `url` is on the configured API server (scheme, host and port)."""
        base, other = httpx.URL(self._options["base_url"]), httpx.URL(url)
        return (base.scheme, base.host, base.port) == (other.scheme, other.host, other.port)

    def get_issue(self, repo: str, number: int) -> Any:
        return self.json("GET", f"repos/{repo}/issues/{number}")


def make_client(
    settings: GitHubSettings,
    *,
    transport: httpx.BaseTransport | None = None,
    timeout_s: float = 20.0,
) -> GitHubClient:
    token = settings.token.get_secret_value() if settings.token else None
    return GitHubClient(settings.api_url, token, transport=transport, timeout_s=timeout_s)


@dataclass
class PollReport:
    """What one intake pass did, for `agent-team tick`, the log and `/healthz`."""

    polls: int = 0
    not_modified: int = 0
    tasks_created: int = 0
    skipped_items: int = 0
    deferred: int = 0  # repo+label pairs still waiting out a back-off
    recovered: int = 0  # claims with no task that the sweep started
    unsettled: int = 0  # issues claimed elsewhere whose task did not exist yet
    errors: list[str] = field(default_factory=list)


def _header_int(headers: httpx.Headers, name: str) -> int | None:
    value = headers.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class GitHubIntake:
    """Polls the configured repositories and turns labelled issues into tasks.

    Args:
        settings: the GitHub settings group (with `confluence_enabled`).
        ledger: the process's ledger (the coordinator's).
        start_task: `Coordinator.start_task`; takes keyword arguments.
        client: the GitHub client.
        clock: aware-UTC now.
        claim_grace_s: the sweep leaves claims younger than this alone (another
            thread may be starting that task right now).
    """

    def __init__(
        self,
        settings: GitHubSettings,
        ledger: db.Ledger,
        start_task: StartTask,
        client: GitHubClient,
        *,
        clock: Callable[[], datetime] | None = None,
        claim_grace_s: float = 60.0,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.start_task = start_task
        self.client = client
        self.clock = clock or wall_clock
        self.claim_grace_s = claim_grace_s
        self.repos = {repo.lower(): repo for repo in settings.repos}
        self.checkouts = settings.checkout_paths()
        self._paused_until: datetime | None = None  # token-wide rate limit
        # Claims the sweep failed to start: (repo, number) -> (failures, not before).
        self._claim_backoff: dict[tuple[str, int], tuple[int, datetime]] = {}
        self._lock = threading.Lock()  # one pass at a time in this process
        self._told_docs_off = False

    # -- labels ------------------------------------------------------------------------

    def labels(self) -> list[tuple[str, str]]:
        """(label, task kind) pairs to poll; the docs label only with the Confluence lane on."""
        pairs = [(self.settings.label, TaskKind.CODE.value)]
        if self.settings.confluence_enabled:
            pairs.append((self.settings.docs_label, TaskKind.CONFLUENCE.value))
        elif not self._told_docs_off:
            self._told_docs_off = True
            log.info(
                "github intake: not polling label %r: the Confluence lane is off "
                "(AGENT_TEAM_CONFLUENCE_ENABLED)",
                self.settings.docs_label,
            )
        return pairs

    def label_for(self, kind: str) -> str:
        """The label that makes tasks of `kind` (the cursor a task is counted under)."""
        if kind == TaskKind.CONFLUENCE.value:
            return self.settings.docs_label
        return self.settings.label

    def kind_for(self, labels: set[str]) -> str | None:
        for label, kind in self.labels():
            if label in labels:
                return kind
        return None

    # -- the one intake path -------------------------------------------------------------

    def _request(self, repo: str, issue: GitHubIssue, kind: str) -> dict[str, Any]:
        """The `start_task` arguments of an issue (the same from every path)."""
        request: dict[str, Any] = {
            "title": issue.task_title(),
            "body": issue.task_body(),
            "kind": kind,
            "source": SOURCE,
            "source_ref": issue.html_url,
            "task_id": task_id_for(repo, issue.number),
            "confluence_enabled": self.settings.confluence_enabled,
            "actor": Actor(f"{repo}#{issue.number}", "github"),
        }
        # A configured clone, else the repository itself: it builds from its mirror.
        checkout = self.checkouts.get(repo.lower())
        request["repo"] = str(checkout.expanduser().resolve()) if checkout is not None else repo
        return request

    def ingest(self, repo: str, issue: GitHubIssue, kind: str) -> str | None:
        """Make `issue` a task exactly once; returns the new task id, or None if not new.

        Raises:
            Exception: whatever starting the task raised, after the claim was released.
        """
        source = issue_source(repo)
        if not db.record_issue_ingested(self.ledger, source=source, issue_id=issue.number):
            return None
        try:
            task_id = self.start_task(**self._request(repo, issue, kind))
        except BaseException:
            db.delete_issue_ingested(self.ledger, source=source, issue_id=issue.number)
            # A poll that ran meanwhile saw the claim and may have stored an ETag whose
            # 304 would hide this issue from now on: the next poll must read it all.
            db.forget_etag(self.ledger, source=source)
            raise
        log.info("github intake: %s#%d became task %s", repo, issue.number, task_id)
        return task_id

    def _has_task(self, repo: str, number: int) -> bool:
        return any(db.get_task(self.ledger, i) is not None for i in task_ids_for(repo, number))

    def ingest_item(self, repo: str, item: Any, kind: str, report: PollReport) -> None:
        """Validate one list item and ingest it; a bad item is logged and skipped."""
        if isinstance(item, dict) and item.get("pull_request") is not None:
            return  # the issues API lists pull requests too
        try:
            issue = GitHubIssue.model_validate(item)
        except ValidationError as exc:
            report.skipped_items += 1
            number = item.get("number") if isinstance(item, dict) else None
            fields = ", ".join(".".join(map(str, e["loc"])) or "item" for e in exc.errors())
            log.warning(
                "github intake: skipped a malformed issue in %s (number %r): bad %s",
                repo,
                number,
                fields,
            )
            return
        self.ingest_issue(repo, issue, kind, report)

    def ingest_issue(self, repo: str, issue: GitHubIssue, kind: str, report: PollReport) -> None:
        """Ingest a validated issue, counting it in `report`; a failure is logged, not raised."""
        try:
            if self.ingest(repo, issue, kind) is not None:
                report.tasks_created += 1
            elif not self._has_task(repo, issue.number):
                # Claimed by another thread or process that has not started the task
                # yet, and may still fail to: this poll must not vouch for it.
                report.unsettled += 1
        except Exception as exc:
            report.errors.append(f"{repo}#{issue.number}: {self.client.clean(str(exc))}")
            log.warning(
                "github intake: could not start a task for %s#%d (retried next poll): %s",
                repo,
                issue.number,
                self.client.clean(f"{type(exc).__name__}: {exc}"),
            )

    # -- polling -----------------------------------------------------------------------

    def poll_once(self) -> PollReport:
        """One pass over every repository and label, then the claim sweep."""
        report = PollReport()
        with self._lock:
            for repo in self.settings.repos:
                for label, kind in self.labels():
                    try:
                        self._poll(repo, label, kind, report)
                    except Exception as exc:  # one repo failing never stops the others
                        message = self.client.clean(f"{type(exc).__name__}: {exc}")
                        report.errors.append(f"{repo} [{label}]: {message}")
                        log.exception("github intake: polling %s [%s] failed", repo, label)
            try:
                report.recovered = self.sweep_claims()
            except Exception as exc:
                report.errors.append(self.client.clean(f"claim sweep: {exc}"))
                log.warning("github intake: claim sweep failed: %s", self.client.clean(str(exc)))
        return report

    def _poll(self, repo: str, label: str, kind: str, report: PollReport) -> None:
        source = issue_source(repo)
        now = self.clock()
        cursor = db.get_cursor(self.ledger, source=source, label=label)
        waits = [self._paused_until]
        if cursor is not None and cursor.next_poll_at:
            waits.append(db.from_iso(cursor.next_poll_at))
        if any(until is not None and until > now for until in waits):
            report.deferred += 1
            return
        report.polls += 1
        params = {
            "labels": label,
            "state": "open",
            "per_page": "100",
            "sort": "updated",
            "direction": "desc",
        }
        etag = cursor.etag if cursor is not None else None
        url: str | None = f"repos/{repo}/issues"
        first: _Page | None = None
        last_headers: httpx.Headers | None = None
        items: list[Any] = []
        try:
            while url is not None:
                page = self.client.issues_page(
                    url,
                    params=params if first is None else None,
                    etag=etag if first is None else None,
                )
                first = first or page
                last_headers = page.headers
                items.extend(page.items)
                url = page.next_url  # exactly what GitHub linked; never built here
                if page.status == 304:
                    break
        except GitHubError as exc:
            self._failed(source, label, exc, cursor, report, exc.headers or last_headers)
            return
        assert first is not None and last_headers is not None
        remaining, reset_at = self._rate(last_headers)
        if first.status == 304:
            report.not_modified += 1
            db.record_poll(
                self.ledger,
                source=source,
                label=label,
                status=304,
                keep_etag=True,
                not_modified=True,
                rate_remaining=remaining,
                rate_reset_at=reset_at,
                next_poll_at=self._after_rate(remaining, reset_at),
                now=now,
            )
            return
        before = (report.tasks_created, len(report.errors), report.unsettled)
        for item in items:
            self.ingest_item(repo, item, kind, report)
        created = report.tasks_created - before[0]
        failed = len(report.errors) > before[1]
        unsettled = report.unsettled > before[2]
        # A failed start must be retried next poll, so then forget the ETag: a 304 would
        # hide the issue. So must an issue another thread claimed but has not started
        # yet (its start may still fail). Otherwise keep page 1's ETag for a cheap 304.
        db.record_poll(
            self.ledger,
            source=source,
            label=label,
            status=200,
            etag=None if failed or unsettled else first.etag,
            tasks_created=created,
            rate_remaining=remaining,
            rate_reset_at=reset_at,
            next_poll_at=self._after_rate(remaining, reset_at),
            error="a task could not be started; retried next poll" if failed else None,
            now=now,
        )

    def _rate(self, headers: httpx.Headers | None) -> tuple[int | None, datetime | None]:
        if headers is None:
            return None, None
        remaining = _header_int(headers, "x-ratelimit-remaining")
        reset = _header_int(headers, "x-ratelimit-reset")
        reset_at = None
        if reset is not None:
            # The window is an hour; a reset further out is a clock problem, not a reason
            # to stop polling for days.
            latest = self.clock() + timedelta(seconds=MAX_BACKOFF_S)
            try:
                reset_at = min(datetime.fromtimestamp(reset, UTC), latest)
            except (OverflowError, OSError, ValueError):
                reset_at = latest
        return remaining, reset_at

    def _after_rate(self, remaining: int | None, reset_at: datetime | None) -> datetime | None:
        """With the limit spent, nothing is asked before it resets (for every repository)."""
        if remaining == 0 and reset_at is not None and reset_at > self.clock():
            self._paused_until = reset_at
            return reset_at
        return None

    def _failed(
        self,
        source: str,
        label: str,
        exc: GitHubError,
        cursor: db.IntakeCursor | None,
        report: PollReport,
        headers: httpx.Headers | None,
    ) -> None:
        now = self.clock()
        failures = cursor.failures if cursor is not None else 0
        message = self.client.clean(str(exc))
        remaining, reset_at = self._rate(headers)
        retry_after = _header_int(headers, "retry-after") if headers is not None else None
        if exc.status in (403, 429) and retry_after is not None:
            wait = float(max(retry_after, 1))
            self._paused_until = now + timedelta(seconds=wait)
        elif exc.status in (403, 429) and remaining == 0 and reset_at is not None:
            wait = max((reset_at - now).total_seconds(), 1.0)
            self._paused_until = reset_at
        elif exc.status in (403, 429):
            wait = min(MIN_BACKOFF_S * 2**failures, MAX_BACKOFF_S)
        else:
            wait = min(self.settings.poll_s * 2**failures, MAX_BACKOFF_S)
        next_poll = now + timedelta(seconds=wait)
        report.errors.append(f"{source} [{label}]: {message}")
        log.warning("github intake: %s [%s]: %s; next try in %.0f s", source, label, message, wait)
        db.record_poll(
            self.ledger,
            source=source,
            label=label,
            status=exc.status,
            keep_etag=True,
            rate_remaining=remaining,
            rate_reset_at=reset_at,
            next_poll_at=next_poll,
            error=message,
            now=now,
        )

    # -- recovery ----------------------------------------------------------------------

    def paused(self) -> bool:
        """True while a token-wide rate limit says nothing may be asked of GitHub."""
        return self._paused_until is not None and self._paused_until > self.clock()

    def sweep_claims(self) -> int:
        """Start the task of every claim that has none (a crash between claim and start).

        Nothing is asked while a rate limit pauses this process; a claim whose
        start failed waits `github_poll_s`, doubling per failure, before its next try.
        """
        if self.paused():
            return 0
        before = db.to_iso(self.clock() - timedelta(seconds=self.claim_grace_s))
        claims = db.list_issue_claims(
            self.ledger, source_prefix=f"{SOURCE}:", claimed_before=before
        )
        held = {(c.source.removeprefix(f"{SOURCE}:"), c.issue_id) for c in claims}
        for key in [k for k in self._claim_backoff if (k[0], str(k[1])) not in held]:
            del self._claim_backoff[key]  # settled elsewhere (the poller, the webhook)
        if not claims:
            return 0
        existing = db.task_ids_by_source(self.ledger, source=SOURCE)
        started = 0
        for claim in claims:
            repo_key = claim.source.removeprefix(f"{SOURCE}:")
            if not claim.issue_id.isdigit():
                continue
            number = int(claim.issue_id)
            if not existing.isdisjoint(task_ids_for(repo_key, number)):
                continue  # the task exists (under today's id or an older version's)
            repo = self.repos.get(repo_key)
            if repo is None:
                continue  # a repository no longer configured: leave its claim alone
            backoff = self._claim_backoff.get((repo_key, number))
            if backoff is not None and backoff[1] > self.clock():
                continue
            outcome = self._recover(repo, number)
            if self.paused():
                break  # the sweep met a rate limit: the pause covers this claim too
            if outcome is None:
                self._back_off_claim(repo_key, number)
            else:
                started += 1 if outcome else 0
                self._claim_backoff.pop((repo_key, number), None)
        return started

    def _back_off_claim(self, repo_key: str, number: int) -> None:
        failures = self._claim_backoff.get((repo_key, number), (0, self.clock()))[0]
        wait = min(self.settings.poll_s * 2**failures, MAX_BACKOFF_S)
        self._claim_backoff[repo_key, number] = (
            failures + 1,
            self.clock() + timedelta(seconds=wait),
        )

    def _pause_for_rate_limit(self, exc: GitHubError) -> None:
        """A 403/429 with `retry-after` or a spent limit pauses every request of this process."""
        if exc.status not in (403, 429) or exc.headers is None:
            return
        now = self.clock()
        retry_after = _header_int(exc.headers, "retry-after")
        remaining, reset_at = self._rate(exc.headers)
        if retry_after is not None:
            self._paused_until = now + timedelta(seconds=max(retry_after, 1))
        elif remaining == 0 and reset_at is not None and reset_at > now:
            self._paused_until = reset_at

    def _recover(self, repo: str, number: int) -> bool | None:
        """Start a claim's task: True if started, False if the claim was released, None
        if it failed and should be tried again later."""
        source = issue_source(repo)
        try:
            issue = GitHubIssue.model_validate(self.client.get_issue(repo, number))
        except GitHubError as exc:
            if exc.status in (404, 410):
                log.warning("github intake: %s#%d is gone; releasing its claim", repo, number)
                db.delete_issue_ingested(self.ledger, source=source, issue_id=number)
                return False
            log.warning("github intake: cannot re-fetch %s#%d: %s", repo, number, exc)
            self._pause_for_rate_limit(exc)
            return None
        except ValidationError:
            log.warning("github intake: %s#%d came back malformed; retried later", repo, number)
            return None
        kind = self.kind_for(issue.label_names())
        if issue.state != "open" or issue.pull_request is not None or kind is None:
            log.info(
                "github intake: %s#%d is no longer an open labelled issue; releasing its claim",
                repo,
                number,
            )
            db.delete_issue_ingested(self.ledger, source=source, issue_id=number)
            return False
        try:
            self.start_task(**self._request(repo, issue, kind))
        except Exception as exc:
            log.warning(
                "github intake: could not start recovered %s#%d: %s",
                repo,
                number,
                self.client.clean(str(exc)),
            )
            return None
        log.info("github intake: recovered claim %s#%d", repo, number)
        return True
