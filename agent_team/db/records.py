"""The ledger's rows as immutable values, so callers never index raw tuples."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from functools import cache
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from agent_team.db.ledger import Params, Reader, Row

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_R = TypeVar("_R", bound="DataclassInstance")

__all__ = [
    "AuditRow",
    "Automation",
    "AutomationRun",
    "Command",
    "IntakeCursor",
    "Lease",
    "ModelFailure",
    "Question",
    "ReplayReport",
    "SideEffect",
    "Task",
    "Transition",
    "UsageSummaryRow",
    "row_to",
]


@cache
def _field_names(cls: type[Any]) -> tuple[str, ...]:
    return tuple(field.name for field in fields(cls))


def row_to(cls: type[_R], row: Row) -> _R:
    """Build a record from a row selected with `SELECT *` (or every field by name)."""
    return cls(**{name: row[name] for name in _field_names(cls)})


def fetch_record(reader: Reader, cls: type[_R], sql: str, params: Params = ()) -> _R | None:
    """The first row of `sql` as a `cls` record, or None when there is none."""
    row = reader.fetch_one(sql, params)
    return None if row is None else row_to(cls, row)


def fetch_records(reader: Reader, cls: type[_R], sql: str, params: Params = ()) -> list[_R]:
    """Every row of `sql` as a `cls` record, in the order the query gives."""
    return [row_to(cls, row) for row in reader.fetch_all(sql, params)]


def _json_or_none(text: str | None) -> Any:
    return None if text is None else json.loads(text)


@dataclass(frozen=True, slots=True)
class Question:
    question_id: str
    thread_id: str
    turn: int
    kind: str
    status: str
    transport: str
    channel_ref: str | None
    posted_at: str | None
    deadline_at: str | None
    answer_json: str | None
    answered_at: str | None
    answered_via: str | None
    payload_json: str | None

    @property
    def answer(self) -> Any:
        return _json_or_none(self.answer_json)

    @property
    def payload(self) -> Any:
        return _json_or_none(self.payload_json)


@dataclass(frozen=True, slots=True)
class Command:
    command_id: str
    kind: str
    task_id: str
    payload_json: str
    state: str
    attempts: int
    claimed_by: str | None
    lease_until: str | None
    created_at: str
    done_at: str | None
    error: str | None

    @property
    def payload(self) -> Any:
        return json.loads(self.payload_json)


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    kind: str
    source: str
    source_ref: str | None
    title: str
    body: str
    status: str
    phase: str
    parked_reason: str | None
    created_at: str
    updated_at: str
    checkpoints_pruned_at: str | None = None  # set by the retention pass
    # While parked `model_unavailable`: when it continues by itself (`db.park_for_models`).
    resume_at: str | None = None
    model_parks: int = 0  # `model_unavailable` parks in a row; picks the next pause


@dataclass(frozen=True, slots=True)
class Transition:
    transition_id: int
    thread_id: str
    from_phase: str | None
    to_phase: str
    entered_at: str
    exited_at: str | None
    status: str
    note: str | None
    epoch: int | None = None  # the lease epoch of the run that wrote it (None: no run)


@dataclass(frozen=True, slots=True)
class ModelFailure:
    """One failed attempt of a model call, and what followed it (`ModelFailureOutcome`)."""

    failure_id: int
    thread_id: str
    stage: str
    model: str
    attempt: int
    outcome: str
    http_status: int | None
    detail: str
    recorded_at: str


@dataclass(frozen=True, slots=True)
class SideEffect:
    effect_id: str
    task_id: str
    kind: str
    state: str
    request_json: str | None
    result_ref: str | None
    result_json: str | None
    error: str | None
    created_at: str
    updated_at: str

    @property
    def request(self) -> Any:
        return _json_or_none(self.request_json)

    @property
    def result(self) -> Any:
        return _json_or_none(self.result_json)


@dataclass(frozen=True, slots=True)
class IntakeCursor:
    source: str
    label: str
    etag: str | None
    last_poll_at: str | None
    last_status: int | None
    polls: int
    not_modified: int
    tasks_created: int
    rate_remaining: int | None
    rate_reset_at: str | None
    next_poll_at: str | None
    failures: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class Lease:
    name: str
    owner: str | None
    epoch: int
    lease_until: str | None
    acquired_at: str | None
    renewed_at: str | None
    takeovers: int


@dataclass(frozen=True, slots=True)
class Automation:
    automation_id: str
    name: str
    title: str
    body: str
    kind: str
    repo: str | None
    schedule_kind: str
    every_s: int | None
    cron: str | None
    timezone: str
    overlap: str
    status: str
    first_run_at: str
    next_run_at: str | None
    last_slot_at: str | None
    created_by: str
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class AutomationRun:
    run_id: str
    automation_id: str
    slot_at: str
    manual: int
    missed: int
    status: str
    task_id: str
    claimed_by: str
    claimed_at: str
    finished_at: str | None
    detail: str | None


@dataclass(frozen=True, slots=True)
class AuditRow:
    seq: int
    at: str
    actor: str
    via: str
    action: str
    target: str
    detail: str | None
    prev_hash: str
    hash: str

    @property
    def detail_dict(self) -> dict[str, Any]:
        return dict(_json_or_none(self.detail) or {})

    def to_json(self) -> dict[str, Any]:
        """The row as `/api/audit` and `agent-team audit --json` both print it.

        `prev_hash` and `hash` are kept so a reader can check the chain itself.
        """
        return {
            "seq": self.seq,
            "at": self.at,
            "actor": self.actor,
            "via": self.via,
            "action": self.action,
            "target": self.target,
            "detail": self.detail_dict,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


@dataclass(frozen=True, slots=True)
class UsageSummaryRow:
    billing_mode: str
    model: str
    stage: str
    calls: int
    input_tokens: int
    output_tokens: int
    usd_cost: float


class ReplayReport(TypedDict):
    """What `replay_outbox` did: lines written back, lines kept, and why."""

    replayed: int
    failed: int
    remaining: int
    bad_lines: int
