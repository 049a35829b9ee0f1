"""The vocabulary of a task: phases, statuses, kinds (docs/architecture.md §1).

These enums are the single source of the allowed values; the ledger's CHECK
constraints and validation are built from them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypedDict

__all__ = [
    "TERMINAL_STATUSES",
    "AutomationRunStatus",
    "AutomationStatus",
    "BillingMode",
    "CommandKind",
    "CommandState",
    "EffectState",
    "ModelFailureOutcome",
    "OverlapPolicy",
    "Phase",
    "PullRequestState",
    "QuestionKind",
    "QuestionStatus",
    "Role",
    "ScheduleKind",
    "TaskKind",
    "TaskState",
    "TaskStatus",
    "question_id_for",
]


class Phase(StrEnum):
    """The node a task is in."""

    INTAKE = "intake"
    CLARIFY = "clarify"
    PLAN = "plan"
    PLAN_REVIEW = "plan_review"
    BUILD = "build"
    CONF_DRAFT = "conf_draft"
    CONF_GATE = "conf_gate"
    CONF_WRITE = "conf_write"
    PR_OPEN = "pr_open"  # the draft pull request is open: waiting on reviews, CI, a merge
    DONE = "done"


class TaskStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    PARKED = "parked"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATUSES: frozenset[TaskStatus] = frozenset(
    {TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.CANCELLED}
)


class TaskKind(StrEnum):
    CODE = "code"
    CONFLUENCE = "confluence"


class QuestionKind(StrEnum):
    CLARIFY = "clarify"
    PLAN_DECISION = "plan_decision"
    CONFLUENCE_APPROVAL = "confluence_approval"
    PULL_REQUEST = "pull_request"  # answered by GitHub: a review, a merge, a close
    PR_DECISION = "pr_decision"  # a person decides: fix, ignore, take over


class QuestionStatus(StrEnum):
    OPEN = "open"
    ANSWERED = "answered"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"


class CommandKind(StrEnum):
    START = "start"
    RESUME = "resume"
    CANCEL = "cancel"


class CommandState(StrEnum):
    PENDING = "pending"
    CLAIMED = "claimed"
    DONE = "done"
    FAILED = "failed"


class EffectState(StrEnum):
    """A side effect's record: begun, carried out (with its result id), or given up."""

    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


class AutomationStatus(StrEnum):
    """An automation runs while `active`; `cancelled` is soft (its rows and runs are kept)."""

    ACTIVE = "active"
    PAUSED = "paused"
    CANCELLED = "cancelled"


class ScheduleKind(StrEnum):
    EVERY = "every"  # a fixed interval from the first run
    CRON = "cron"  # a cron expression in a time zone
    ONCE = "once"  # one run at `first_run_at`


class OverlapPolicy(StrEnum):
    SKIP = "skip"  # no new run while the previous run's task is open
    ALLOW = "allow"


class AutomationRunStatus(StrEnum):
    """A slot's run: claimed first, then exactly one of the others."""

    CLAIMED = "claimed"
    CREATED = "created"
    SKIPPED_BUDGET = "skipped_budget"
    SKIPPED_OVERLAP = "skipped_overlap"
    FAILED = "failed"


class BillingMode(StrEnum):
    API = "api"
    SUBSCRIPTION = "subscription"


class ModelFailureOutcome(StrEnum):
    """What followed one failed attempt of a model call (`model_failures.outcome`)."""

    RETRIED = "retried"  # the same model is tried again after a back-off
    FELL_BACK = "fell_back"  # the next model of the stage is tried
    GAVE_UP = "gave_up"  # retries and fallbacks spent: the task parks `model_unavailable`
    REFUSED = "refused"  # the provider refused (401, 403, 400): parks `model_refused`
    INVALID = "invalid"  # an answer that did not fit the expected structure


class PullRequestState(StrEnum):
    """A task's pull request as the PR gate knows it (`pull_requests.state`)."""

    OPEN = "open"
    MERGED = "merged"
    CLOSED = "closed"


class Role(StrEnum):
    """What a person may do, lowest first (`requests.roles` says which action needs which)."""

    VIEWER = "viewer"
    CONTRIBUTOR = "contributor"
    MAINTAINER = "maintainer"
    OWNER = "owner"

    @property
    def rank(self) -> int:
        return list(Role).index(self)


class TaskState(TypedDict, total=False):
    """The LangGraph state of one task (checkpointed after every node).

    Only plain JSON-able values live here, so checkpoints stay readable and
    portable between versions.
    """

    task_id: str
    kind: str
    title: str
    body: str
    repo: str | None
    clarifications: list[dict[str, str]]  # [{"question": ..., "answer": ...}]
    clarify_rounds: int
    pending_question: str | None  # a clarify question the model wants to ask
    turn: int  # questions asked and answered so far; the next ask is turn + 1
    plan: dict[str, Any] | None  # models.schemas.Plan as a dict
    plan_source: str | None  # "model" or "human" (an `edit` answer)
    plan_feedback: str | None
    decision: str | None  # the last plan_review decision
    build: dict[str, Any] | None  # builders.BuildResult as a dict
    pull_request: dict[str, Any] | None  # {"url", "number", "repo", "head"} once a PR is open
    # The loop after the PR (nodes/pull_request.py): the gate's last answer (what happened
    # on GitHub), where to go next, the follow-up rounds made, a person's fix note.
    pr_event: dict[str, Any] | None
    pr_next: str | None
    pr_round: int
    pr_note: str | None
    pr_force: bool  # a person said fix after a follow-up was refused: push it anyway
    # The Confluence lane (nodes/confluence_writer.py): page id, draft, feedback, decision,
    # and the write's result.
    confluence: dict[str, Any] | None
    outcome: str | None  # "done" or "cancelled" once decided


def question_id_for(task_id: str, turn: int) -> str:
    """Deterministic, so a gate node that runs again never makes a second row."""
    return f"{task_id}:q{turn}"
