"""Reads a head commit's CI from GitHub, and does the one thing we may do about it: rerun.

Issue #29: CI is watched, not trusted blindly. `CiReader.report` lists a
commit's check runs, commit statuses and Actions workflow runs and folds them
into a `ci_report.CiReport`. GitHub's quirks are handled here, once:

- the combined status says `pending` for a commit with no statuses at all; we
  read the statuses themselves, so "none" is nothing to wait for;
- an Actions job is a check run under the same id, in its workflow run's check
  suite: that suite maps a failed check to the run whose failed jobs can be rerun;
- a workflow run that has not listed its jobs yet is CI that has started;
- check suites are not read: GitHub makes one for every app that may report,
  and those that never run stay `queued` forever, so they say nothing;
- required checks come from classic branch protection (404: none; 403: we may
  not read it) and from rulesets (readable with metadata access), together.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from typing import Any, Literal
from urllib.parse import quote

import httpx
from pydantic import Field

from agent_team.integrations.github.ci_logs import JobLogs, LogExcerpt
from agent_team.integrations.github.ci_report import (
    Check,
    CiReport,
    CommitStatus,
    Job,
    WorkflowRun,
    check_run_state,
    status_state,
)
from agent_team.integrations.github.intake import GitHubClient, GitHubError
from agent_team.integrations.github.pulls import CheckRun, PullRequests
from agent_team.integrations.github.wire import Wire, checked

__all__ = ["CiReader"]

_JOB_URL = re.compile(r"/actions/runs/(\d+)/job/(\d+)")


class _Status(Wire):
    id: int
    context: str
    state: Literal["error", "failure", "pending", "success"]
    description: str | None = None
    target_url: str | None = None


class _Run(Wire):
    id: int
    name: str | None = None
    status: str | None = None  # nullable in GitHub's schema
    conclusion: str | None = None
    head_sha: str
    event: str
    run_attempt: int = 1
    check_suite_id: int | None = None
    html_url: str


class _Job(Wire):
    id: int
    run_id: int
    name: str
    status: str
    conclusion: str | None = None
    run_attempt: int = 1
    html_url: str | None = None


class _Policy(Wire):
    contexts: list[str]


class _RuleCheck(Wire):
    context: str


class _RuleParameters(Wire):
    required_status_checks: list[_RuleCheck] = Field(default_factory=list)


class _Rule(Wire):
    type: str
    parameters: dict[str, Any] | None = None


class CiReader:
    """Reads a commit's CI and reruns failed jobs, through the daemon's `GitHubClient`.

    Args:
        client: the daemon's client (the token, the redaction, the API URL).
        log_transport: an httpx transport for the job-log host (tests); None: the network.
        log_max_bytes: how much of a job log is read at most.
    """

    def __init__(
        self,
        client: GitHubClient,
        *,
        log_transport: httpx.BaseTransport | None = None,
        log_max_bytes: int = 1_000_000,
    ) -> None:
        self.client = client
        self.pulls = PullRequests(client)
        self.logs = JobLogs(client, transport=log_transport, max_bytes=log_max_bytes)

    def report(self, repo: str, sha: str, *, required: Collection[str] | None = None) -> CiReport:
        """CI on `sha`: check runs, statuses and workflow runs, folded (three listings).

        Raises:
            GitHubError: an error status or a malformed reply.
        """
        runs = self.workflow_runs(repo, sha)
        by_suite = {run.suite_id: run.id for run in runs if run.suite_id is not None}
        checks = [_from_check_run(run, by_suite) for run in self.pulls.check_runs(repo, sha)]
        checks += [
            Check(
                name=status.context,
                kind="status",
                state=status_state(status.state),
                conclusion=status.state,
                id=status.id,
                run_id=None,
                url=status.target_url,
            )
            for status in self.statuses(repo, sha)
        ]
        return CiReport(
            sha=sha,
            checks=tuple(checks),
            runs=tuple(runs),
            required=frozenset(required or ()) or None,  # none required: every check counts
        )

    def statuses(self, repo: str, sha: str) -> list[CommitStatus]:
        """The latest status of each context on `sha` (none: an empty list, not pending)."""
        found = []
        for item in self._wrapped(f"repos/{repo}/commits/{sha}/status", "statuses", {}):
            status = checked(_Status, item, f"commit status on {repo}@{sha[:12]}")
            found.append(
                CommitStatus(
                    id=status.id,
                    context=status.context,
                    state=status.state,
                    description=status.description,
                    target_url=status.target_url,
                )
            )
        return found

    def workflow_runs(self, repo: str, sha: str) -> list[WorkflowRun]:
        """Every Actions workflow run of `sha`, newest first."""
        found = []
        url = f"repos/{repo}/actions/runs"
        for item in self._wrapped(url, "workflow_runs", {"head_sha": sha}):
            run = checked(_Run, item, f"workflow run on {repo}@{sha[:12]}")
            found.append(
                WorkflowRun(
                    id=run.id,
                    name=run.name,
                    status=run.status,
                    conclusion=run.conclusion,
                    event=run.event,
                    attempt=run.run_attempt,
                    suite_id=run.check_suite_id,
                    url=run.html_url,
                )
            )
        return found

    def jobs(self, repo: str, run_id: int) -> list[Job]:
        """The jobs of a workflow run's latest attempt."""
        found = []
        for item in self._wrapped(f"repos/{repo}/actions/runs/{run_id}/jobs", "jobs", {}):
            job = checked(_Job, item, f"job of workflow run {run_id} in {repo}")
            found.append(
                Job(
                    id=job.id,
                    run_id=job.run_id,
                    name=job.name,
                    status=job.status,
                    conclusion=job.conclusion,
                    attempt=job.run_attempt,
                    url=job.html_url,
                )
            )
        return found

    def required_checks(self, repo: str, branch: str) -> frozenset[str] | None:
        """The check names and status contexts `branch` requires before a merge, from
        branch protection and rulesets; None when neither requires any (or we may not
        read them): then every reported check counts.

        Raises:
            GitHubError: an error status other than "not protected", or a malformed reply.
        """
        where = quote(branch, safe="/")
        names: set[str] = set()
        response = self.client.request(
            "GET", f"repos/{repo}/branches/{where}/protection/required_status_checks"
        )
        if response.status_code == 200:
            policy = checked(_Policy, _json(response), f"protection of {branch}")
            names.update(policy.contexts)
        elif response.status_code == 403 and not _rate_limited(response):
            pass  # reading classic protection needs admin; rulesets below need less
        elif response.status_code != 404:  # 404: not protected, or no required checks
            raise GitHubError(
                self.client.describe(response),
                status=response.status_code,
                headers=response.headers,
            )
        for item in self._plain(f"repos/{repo}/rules/branches/{where}"):
            rule = checked(_Rule, item, f"rule of {repo} branch {branch}")
            if rule.type != "required_status_checks":
                continue
            params = checked(_RuleParameters, rule.parameters or {}, f"ruleset of {branch}")
            names.update(check.context for check in params.required_status_checks)
        return frozenset(names) or None

    def log_excerpt(
        self, repo: str, job_id: int, *, max_lines: int = 40, max_chars: int = 4000
    ) -> LogExcerpt:
        """A redacted excerpt of an Actions job's log around its first error; never raises
        (an unreadable log is an empty excerpt with the reason)."""
        return self.logs.excerpt(repo, job_id, max_lines=max_lines, max_chars=max_chars)

    def rerun_failed_jobs(self, repo: str, run_id: int) -> None:
        """Start a new attempt of workflow run `run_id` with its failed jobs (and their
        dependants) only.

        Raises:
            GitHubError: GitHub refused (403: the run is still going, has no failed
                job, is too old, or the token may not write Actions) or another error.
        """
        response = self.client.request(
            "POST", f"repos/{repo}/actions/runs/{run_id}/rerun-failed-jobs"
        )
        if response.status_code == 201:
            return
        if response.status_code == 403 and not _rate_limited(response):
            raise GitHubError(
                self.client.clean(
                    f"GitHub will not rerun the failed jobs of workflow run {run_id} in {repo}"
                    f" ({_message(response) or 'forbidden'}): a run can be rerun once it has"
                    " finished with a failed job, within 30 days, by a token with Actions"
                    " write access"
                ),
                status=403,
                headers=response.headers,
            )
        raise GitHubError(
            self.client.describe(response), status=response.status_code, headers=response.headers
        )

    def _wrapped(self, url: str, key: str, params: dict[str, str]) -> Iterator[Any]:
        for page in self.client.pages(url, params={**params, "per_page": "100"}, key=key):
            yield from page

    def _plain(self, url: str) -> Iterator[Any]:
        for page in self.client.pages(url, params={"per_page": "100"}):
            yield from page


def _from_check_run(run: CheckRun, by_suite: dict[int, int]) -> Check:
    run_id = by_suite.get(run.suite_id) if run.suite_id is not None else None
    if run_id is None and run.app == "github-actions" and run.details_url:
        # The runs list can lag a moment behind the checks: the job's URL names its run.
        match = _JOB_URL.search(run.details_url)
        if match is not None and int(match[2]) == run.id:
            run_id = int(match[1])
    return Check(
        name=run.name,
        kind="check_run",
        state=check_run_state(run.status, run.conclusion),
        conclusion=run.conclusion,
        id=run.id,
        run_id=run_id,
        url=run.details_url,
    )


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise GitHubError(
            f"GitHub sent malformed JSON for {response.request.url.path}", status=200
        ) from None


def _message(response: httpx.Response) -> str:
    try:
        payload = response.json()
    except ValueError:
        return ""
    return str(payload.get("message", ""))[:300] if isinstance(payload, dict) else ""


def _rate_limited(response: httpx.Response) -> bool:
    """A 403 that is GitHub's rate limit, not a refusal."""
    return bool(response.headers.get("x-ratelimit-remaining") == "0")
