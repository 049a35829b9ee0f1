"""`model_failures`: every failed attempt of a model call, and what followed it.

A model call retries and falls back before it gives up (`models.caller`), so a
call that answered may have cost minutes of failures first. The budget rows
record only the answers; these rows keep the attempts that did not answer, so
`show`, `/api/task` and the task page can say that a stage's call answered
after two failed attempts (HTTP 529, overloaded) and which model answered, and
an operator sees which provider keeps failing before the task parks.
"""

from __future__ import annotations

from datetime import datetime

from agent_team.db.clock import to_iso
from agent_team.db.ledger import Ledger, Reader, write_statement
from agent_team.db.records import ModelFailure, fetch_records
from agent_team.db.validate import require_member
from agent_team.exceptions import LedgerInputError
from agent_team.task_model import ModelFailureOutcome

__all__ = ["DETAIL_CHARS", "list_model_failures", "record_model_failure"]

# A provider's error can be a whole HTML page; the start says what went wrong.
DETAIL_CHARS = 2000


def record_model_failure(
    ledger: Ledger,
    *,
    thread_id: str,
    stage: str,
    model: str,
    attempt: int,
    outcome: str,
    http_status: int | None,
    detail: str,
    at: datetime,
) -> None:
    """Record one failed attempt of a model call (one statement, one transaction).

    History, not a decision: it commits without waiting for the disk, and the
    run's next flushed commit (the answer's budget row, the park) makes it
    durable with itself.

    Args:
        thread_id: the task.
        stage: the pipeline stage of the call (`clarify`, `plan`, ...).
        model: the model spec that failed (`anthropic:claude-sonnet-4-5`).
        attempt: 1 for the first try of this model in this call, then 2, ...
        outcome: what followed (`ModelFailureOutcome`).
        http_status: the provider's HTTP status, if it answered with one.
        detail: the provider's error, already redacted; cut to `DETAIL_CHARS`.
        at: when the attempt failed.

    Raises:
        LedgerInputError: an unknown outcome, an attempt below 1, an HTTP status
            outside 100..599, or an empty task, stage or model.
    """
    require_member(outcome, ModelFailureOutcome, "model failure outcome")
    if not thread_id or not stage or not model:
        raise LedgerInputError("a model failure needs a task, a stage and a model")
    if attempt < 1:
        raise LedgerInputError(f"a model failure's attempt counts from 1, not {attempt}")
    if http_status is not None and not 100 <= http_status <= 599:
        raise LedgerInputError(f"HTTP status {http_status} is not one (100..599)")
    write_statement(
        ledger,
        "INSERT INTO model_failures (thread_id, stage, model, attempt, outcome, http_status, "
        "detail, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            thread_id,
            stage,
            model,
            attempt,
            outcome,
            http_status,
            detail[:DETAIL_CHARS],
            to_iso(at),
        ),
        flush=False,
    )


def list_model_failures(ledger: Reader, thread_id: str) -> list[ModelFailure]:
    """A task's failed model attempts in the order they were recorded."""
    return fetch_records(
        ledger,
        ModelFailure,
        "SELECT * FROM model_failures WHERE thread_id = ? ORDER BY failure_id",
        (thread_id,),
    )
