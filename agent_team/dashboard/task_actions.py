"""What the task page offers to do with a task: cancel, retry, reopen, edit the plan, and links.

Why apart from `pages.py`: which request applies depends on the task's status
as the request side judges it (`requests.inbox`: a finished task cannot be
cancelled; only a parked or failed one is retried, never one parked on an
expired question, which is reopened instead); keeping those rules in one
small place keeps the page handler a list of sections. The buttons post to
the JSON API (`api_actions`), which checks everything again: what is
offered here is a courtesy, never the check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import quote

from agent_team import db
from agent_team.common.git_host import git_host_url
from agent_team.config import Settings
from agent_team.dashboard.api_actions import DEFAULT_REOPEN
from agent_team.dashboard.auth import Viewer
from agent_team.dashboard.permissions import abilities
from agent_team.dashboard.task_links import Link, work_links
from agent_team.reports.task import TaskReport
from agent_team.task_model import TERMINAL_STATUSES, QuestionKind, QuestionStatus, TaskStatus

__all__ = [
    "OFFERED",
    "TaskActions",
    "kept_since",
    "plan_to_edit",
    "reopen_path",
    "retry_why",
    "task_actions",
]

# Parks a retry cannot help: an expired question is reopened; lost checkpoints mean a new
# submit (`reports.triage`'s fixes say the same).
_NOT_RETRIED = frozenset({"question_expired", "needs_operator"})
# The role-table actions the page's buttons stand for (`roles.ACTIONS`).
OFFERED = ("cancel", "retry", "reopen", f"answer:{QuestionKind.PLAN_DECISION.value}")


@dataclass(frozen=True, slots=True)
class TaskActions:
    """The endpoints the page's buttons post to (None: not offered), and the links."""

    cancel: str | None
    retry: str | None
    retry_reason: str
    reopen_deadline: str
    links: tuple[Link, ...]
    can: dict[str, bool]


def _quoted(value: str) -> str:
    return quote(value, safe="")


def kept_since(settings: Settings, now: datetime) -> datetime | None:
    """A failed task last changed before this has lost (or is losing) its checkpoints to the
    retention pass, so a retry is refused (`TaskRequests.retry`); None: they are kept."""
    keep = settings.checkpoint_retention
    if keep <= timedelta(0):
        return None
    try:
        return now - keep
    except OverflowError:  # a retention longer than the calendar: nothing is that old
        return None


def retry_why(task: db.Task, failed_since: datetime | None = None) -> str | None:
    """Why the task may be retried, in words; None when a retry is not what it needs."""
    if task.status == TaskStatus.PARKED and task.parked_reason not in _NOT_RETRIED:
        return f"parked: {task.parked_reason or 'no reason given'}"
    if task.status == TaskStatus.FAILED and task.checkpoints_pruned_at is None:
        if failed_since is None or db.from_iso(task.updated_at) >= failed_since:
            return f"failed in {task.phase}"
    return None


def _pushed(report: TaskReport) -> bool:
    return report.pull_request is not None or any(
        e.kind == "git_push" and e.state == "done" for e in report.effects
    )


def _submitted_repo(view: db.Reader, task_id: str) -> str | None:
    """The repository named at submit, kept in the task's start command (while it is kept)."""
    start = db.get_command(view, f"start:{task_id}")
    repo = start.payload.get("repo") if start is not None else None
    return str(repo) if repo else None


def task_actions(
    view: db.Reader,
    report: TaskReport,
    viewer: Viewer | None,
    settings: Settings,
    clean: Callable[[str], str],
    now: datetime,
) -> TaskActions:
    """What the page offers `viewer` for `report`'s task, read from one snapshot `view`."""
    task = report.task
    can = abilities(view, viewer, OFFERED)
    why = retry_why(task, kept_since(settings, now))
    pull = report.pull_request
    build = report.build
    links = work_links(
        branch=clean(build.branch) if build else None,
        commit=clean(build.commit) if build else None,
        pull_url=clean(pull.url) if pull and pull.url else None,
        pull_name=clean(f"{pull.repo}#{pull.number}") if pull else None,
        pushed=_pushed(report),
        repos=(_submitted_repo(view, task.id),),
        source=task.source,
        github_host=git_host_url(settings.github_api_url),
    )
    task_path = f"/api/task/{_quoted(task.id)}"
    return TaskActions(
        cancel=f"{task_path}/cancel" if task.status not in TERMINAL_STATUSES else None,
        retry=f"{task_path}/retry" if why else None,
        retry_reason=why or "",
        reopen_deadline=DEFAULT_REOPEN,
        links=tuple(links),
        can=can,
    )


def plan_to_edit(report: TaskReport, question_id: str) -> str | None:
    """The plan an open plan question asks about: what the plan editor starts from."""
    for plan in report.plans:
        if plan.question_id == question_id and plan.status == QuestionStatus.OPEN:
            return plan.markdown
    return None


def reopen_path(question_id: str) -> str:
    """Where an expired question's Reopen form posts."""
    return f"/api/questions/{_quoted(question_id)}/reopen"
