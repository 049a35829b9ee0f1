"""A head commit's CI as one record: every check, normalised, and the verdicts on them.

Issue #29: the CI watcher and gate decide on this record alone (`CiReader.report`
in `ci.py` builds it). GitHub reports CI on three surfaces (check runs by name,
commit statuses by context, Actions workflow runs); here they are one list of
`Check`s with one state each, so "is it green?", "what failed?" and "is this
failure worth a rerun?" have one answer each:

- a completed check run passes only as `success`, `neutral` or `skipped` (what
  branch protection accepts); every other conclusion is a failure;
- a commit status's `error` is a failure; no statuses at all is nothing to wait for;
- red waits until nothing is pending: GitHub refuses to rerun a run still going,
  and a person asked about CI should see all of it;
- a required check nothing reported yet is waited for, as GitHub shows "Expected".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from agent_team.integrations.github.ci_logs import LogExcerpt, flaky_pattern

__all__ = [
    "Check",
    "CheckState",
    "CiReport",
    "CiState",
    "CommitStatus",
    "Job",
    "WorkflowRun",
    "check_run_state",
    "flaky_reason",
    "looks_flaky",
    "status_state",
]

CheckState = Literal["pending", "success", "failure", "neutral"]  # neutral: skipped too
CiState = Literal["pending", "green", "red"]

_PASSING: dict[str, CheckState] = {"success": "success", "neutral": "neutral", "skipped": "neutral"}
_STATUS_STATES: dict[str, CheckState] = {
    "success": "success",
    "pending": "pending",
    "failure": "failure",
    "error": "failure",
}
_WORST_FIRST: tuple[CheckState, ...] = ("failure", "pending", "success", "neutral")


@dataclass(frozen=True, slots=True)
class CommitStatus:
    id: int
    context: str
    state: str  # error, failure, pending, success
    description: str | None
    target_url: str | None


@dataclass(frozen=True, slots=True)
class WorkflowRun:
    id: int
    name: str | None
    status: str | None  # queued, in_progress, completed, waiting, ...
    conclusion: str | None
    event: str
    attempt: int  # 2 and up: it was rerun
    suite_id: int | None
    url: str

    @property
    def finished(self) -> bool:
        return self.status == "completed"


@dataclass(frozen=True, slots=True)
class Job:
    """One job of a workflow run; `id` is also its check run's id and its log's key."""

    id: int
    run_id: int
    name: str
    status: str
    conclusion: str | None
    attempt: int
    url: str | None


@dataclass(frozen=True, slots=True)
class Check:
    """One check of a commit: a check run by its name, or a commit status by its context."""

    name: str
    kind: Literal["check_run", "status"]
    state: CheckState
    conclusion: str | None  # GitHub's own word: a check run's conclusion, a status's state
    id: int  # check run id (an Actions job's id) or status id
    run_id: int | None  # the workflow run of an Actions job: what `rerun_failed_jobs` takes
    url: str | None

    @property
    def job_id(self) -> int | None:
        """The Actions job whose log `CiReader.log_excerpt` reads; None for other checks."""
        return self.id if self.run_id is not None else None


@dataclass(frozen=True, slots=True)
class CiReport:
    """CI on one commit, folded: every check with a normalised state, and the verdicts.

    `required` is the base branch's required checks (None: no protection we can
    read, so every reported check counts). A required check nothing has reported
    yet is `missing`, and waited for as GitHub does ("Expected").
    """

    sha: str
    checks: tuple[Check, ...]
    runs: tuple[WorkflowRun, ...]
    required: frozenset[str] | None = None

    @property
    def started(self) -> bool:
        """Anything at all has reported; False right after a push, or with no CI."""
        return bool(self.checks or self.runs)

    @property
    def missing(self) -> tuple[str, ...]:
        names = {check.name for check in self.checks}
        return tuple(sorted((self.required or frozenset()) - names))

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.state == "failure")

    @property
    def state(self) -> CiState:
        """Every reported check and workflow run: red only once nothing is pending, so a
        rerun can start (GitHub refuses one for a run still going) and a person sees it all."""
        waiting = bool(self.missing) or any(not run.finished for run in self.runs)
        return _verdict(self.checks, waiting)

    @property
    def required_state(self) -> CiState:
        """The required checks alone (every check when none are known): what merging needs."""
        if self.required is None:
            return self.state
        counted = [check for check in self.checks if check.name in self.required]
        return _verdict(counted, bool(self.missing))

    def state_of(self, name: str) -> CheckState | None:
        """The state of the check(s) named `name` (worst first); None when none reported."""
        states = {check.state for check in self.checks if check.name == name}
        return next((state for state in _WORST_FIRST if state in states), None)


def _verdict(checks: Iterable[Check], waiting: bool) -> CiState:
    states = {check.state for check in checks}
    if waiting or "pending" in states:
        return "pending"
    return "red" if "failure" in states else "green"


def check_run_state(status: str, conclusion: str | None) -> CheckState:
    """A completed check run passes only as branch protection counts a pass."""
    if status != "completed":
        return "pending"  # queued, in_progress, waiting, requested, pending
    return _PASSING.get(conclusion or "", "failure")


def status_state(state: str) -> CheckState:
    """A commit status's state (`error` is a failure too)."""
    return _STATUS_STATES.get(state, "failure")


def flaky_reason(
    check: Check, log: LogExcerpt | str = "", base: CiReport | None = None
) -> str | None:
    """Why `check`'s failure looks flaky, or None: it passed on the base branch's head
    (`base`, that commit's report), its job ran out of time, or its log names a timeout
    or a network error (`ci_logs.FLAKY_PATTERNS`)."""
    if base is not None and base.state_of(check.name) == "success":
        return f"{check.name} passed on the base branch's head {base.sha[:12]}"
    if check.conclusion == "timed_out":
        return f"{check.name} ran out of time"
    found = log.flaky if isinstance(log, LogExcerpt) else flaky_pattern(log)
    return f"its log names {found}" if found else None


def looks_flaky(check: Check, log: LogExcerpt | str = "", base: CiReport | None = None) -> bool:
    """True when a rerun is worth trying (see `flaky_reason`)."""
    return flaky_reason(check, log, base) is not None
