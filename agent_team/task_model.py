"""The vocabulary of a task: phases, statuses, kinds (DESIGN.md §1).

These enums are the single source of the allowed values; the ledger's CHECK
constraints and validation are built from them.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "TERMINAL_STATUSES",
    "BillingMode",
    "CommandKind",
    "CommandState",
    "Phase",
    "QuestionKind",
    "QuestionStatus",
    "TaskKind",
    "TaskStatus",
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


class BillingMode(StrEnum):
    API = "api"
    SUBSCRIPTION = "subscription"
