"""Requests about tasks written to the ledger: submit, answer, reopen, retry, cancel.

Every surface reaches these through `task_requests.TaskRequests`, which also
wakes the worker; only the request side imports this module (an architecture
test checks it). Nothing here touches the graph: each request lands in the ledger (a task row
and a `start` command; an answer and its `resume` command in one
transaction; a reopened question; a `cancel` command), and whichever
coordinator drains the commands inbox acts on it (docs/architecture.md §3).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from agent_team import db
from agent_team.exceptions import (
    IdempotencyKeyReusedError,
    InvalidAnswerError,
    LedgerInputError,
    QuestionClosedError,
    TaskRefusedError,
    UnknownTaskError,
)
from agent_team.requests.actors import INTERNAL, Actor
from agent_team.requests.answers import (
    PR_DECISION_HELP,
    PULL_REQUEST_HELP,
    closed_message,
    parse_answer,
)
from agent_team.requests.limits import MAX_NOTE_CHARS, check_task_size
from agent_team.task_model import (
    TERMINAL_STATUSES,
    CommandKind,
    QuestionKind,
    QuestionStatus,
    TaskKind,
    TaskStatus,
)

__all__ = [
    "add_note",
    "cancel_task",
    "reopen",
    "retry_task",
    "submit_answer",
    "submit_task",
    "submit_task_once",
]


def submit_task(
    ledger: db.Ledger,
    *,
    title: str,
    body: str = "",
    kind: str = TaskKind.CODE.value,
    source: str = "cli",
    source_ref: str | None = None,
    repo: str | None = None,
    task_id: str | None = None,
    confluence_enabled: bool = False,
    actor: Actor = INTERNAL,
) -> str:
    """Record a task (with its audit row) and its `start` command; returns the task id.

    Idempotent for a given `task_id`: a second submit changes nothing (for a
    finished task it queues nothing either). The task, its audit row and its
    `start` command are one transaction.

    Raises:
        TaskTooLargeError: a title or body over the limits in `agent_team.requests.limits`.
        TaskRefusedError: a `confluence` task while the docs lane is off.
    """
    _check_submission(title, body, kind, confluence_enabled)
    new_id = task_id or _new_task_id()
    db.create_task(
        ledger,
        task_id=new_id,
        kind=kind,
        title=title,
        body=body,
        source=source,
        source_ref=source_ref,
        audit=_submit_audit(actor, new_id, kind, source, title),
        start=_start(new_id, repo),
    )
    return new_id


def submit_task_once(
    ledger: db.Ledger,
    idempotency_key: str,
    *,
    now: datetime,
    title: str,
    body: str = "",
    kind: str = TaskKind.CODE.value,
    source: str = "cli",
    source_ref: str | None = None,
    repo: str | None = None,
    confluence_enabled: bool = False,
    actor: Actor = INTERNAL,
) -> db.KeptRequest:
    """`submit_task` under the caller's `idempotency_key`: the first request under it (for
    `db.KEY_WINDOW`) makes the task, and every later one gets that task back.

    The key is the caller's own: `actor` (via and name) scopes it, so two callers'
    keys never meet. What the request asks for is kept as a digest, so the same key
    with a different request is refused instead of answered with the wrong task.

    Raises:
        IdempotencyKeyReusedError: the key names a different request; nothing was stored.
        TaskTooLargeError, TaskRefusedError: as `submit_task`.
    """
    _check_submission(title, body, kind, confluence_enabled)
    wanted = {
        "title": title,
        "body": body,
        "kind": kind,
        "source": source,
        "source_ref": source_ref,
        "repo": repo,
    }
    fingerprint = hashlib.sha256(
        json.dumps(wanted, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
    ).hexdigest()
    key = db.IdempotencyKey(f"{actor.via}:{actor.name}", idempotency_key, fingerprint)
    new_id = _new_task_id()
    kept = db.create_task_once(
        ledger,
        key,
        now=now,
        task_id=new_id,
        kind=kind,
        title=title,
        body=body,
        source=source,
        source_ref=source_ref,
        audit=_submit_audit(actor, new_id, kind, source, title),
        start=_start(new_id, repo),
    )
    if kept.fingerprint != fingerprint:
        raise IdempotencyKeyReusedError(
            f"{IdempotencyKeyReusedError.header}: this key already made task {kept.task_id} "
            "from a different request in the last 24 h; send the same request to get that "
            "task again, or a new key for a new task (nothing was stored)"
        )
    return kept


def _check_submission(title: str, body: str, kind: str, confluence_enabled: bool) -> None:
    check_task_size(title, body)
    if kind == TaskKind.CONFLUENCE and not confluence_enabled:
        raise TaskRefusedError(
            "confluence tasks need the documentation lane, which is off in this build; "
            "submit a `code` task instead"
        )


def _new_task_id() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def _submit_audit(actor: Actor, task_id: str, kind: str, source: str, title: str) -> db.AuditEntry:
    return actor.entry("submit", task_id, {"kind": kind, "source": source, "title": title[:200]})


def _start(task_id: str, repo: str | None) -> db.StartCommand:
    payload: dict[str, Any] = {"repo": repo} if repo else {}
    return db.StartCommand(f"start:{task_id}", json.dumps(payload, sort_keys=True))


def reopen(
    ledger: db.Ledger, question_id: str, *, deadline_at: datetime, actor: Actor = INTERNAL
) -> db.Question:
    """expired -> open with a new deadline; the task waits on it again.

    Delivery is left to the coordinator (the question has no `channel_ref`
    now, so the next delivery pass posts it again).

    Raises:
        UnknownTaskError: no such question.
        QuestionClosedError: the question is not expired.
    """
    question = db.get_question(ledger, question_id)
    if question is None:
        raise UnknownTaskError(f"no question {question_id!r}")
    owner = db.get_task(ledger, question.thread_id)
    if owner is not None and owner.status in TERMINAL_STATUSES:
        raise TaskRefusedError(
            f"task {owner.id} is {owner.status}; its questions cannot be reopened "
            "(submit the task again instead)"
        )
    if not db.reopen_for_task(
        ledger,
        question_id=question_id,
        deadline_at=deadline_at,
        note=f"question {question_id} reopened",
        audit=actor.entry("reopen", question_id, {"deadline_at": db.to_iso(deadline_at)}),
    ):
        raise QuestionClosedError(
            f"question {question_id} is {question.status}; only expired questions reopen"
        )
    reopened = db.get_question(ledger, question_id)
    assert reopened is not None
    return reopened


def add_note(ledger: db.Ledger, task_id: str, text: str, *, actor: Actor) -> db.AuditRow:
    """Leave a note on a task in flight: people see it (its page, `show`, /api/task) and its
    next model stage reads it (`nodes.common.people_notes`).

    A note is an audit row (`db.NOTE_ACTION`): it names who wrote it and is never edited.

    Raises:
        UnknownTaskError: no such task.
        TaskRefusedError: the task has finished.
        LedgerInputError: an empty note, or one over `MAX_NOTE_CHARS`.
    """
    note = text.strip()
    if not note:
        raise LedgerInputError("text: the note is empty")
    if len(note) > MAX_NOTE_CHARS:
        raise LedgerInputError(
            f"text: the note is {len(note):,} characters; at most {MAX_NOTE_CHARS:,}"
        )
    task = db.get_task(ledger, task_id)
    if task is None:
        raise UnknownTaskError(f"no task {task_id!r}; list them with `agent-team tasks`")
    if task.status in TERMINAL_STATUSES:
        raise TaskRefusedError(
            f"task {task_id} is {task.status}: a note reaches its next stage, and it has none; "
            "nothing was stored"
        )
    return db.record_audit(ledger, actor.entry(db.NOTE_ACTION, task_id, {"text": note}))


def cancel_task(ledger: db.Ledger, task_id: str, *, actor: Actor = INTERNAL) -> None:
    """Queue a cancel; the worker closes the task and supersedes its open questions.

    Raises:
        UnknownTaskError: no such task.
        TaskRefusedError: the task already finished.
    """
    task = db.get_task(ledger, task_id)
    if task is None:
        raise UnknownTaskError(f"no task {task_id!r}; list them with `agent-team tasks`")
    if task.status in TERMINAL_STATUSES:
        raise TaskRefusedError(f"task {task_id} is already {task.status}")
    db.enqueue_command(
        ledger,
        command_id=f"cancel:{task_id}",
        kind=CommandKind.CANCEL.value,
        task_id=task_id,
        payload={},
        audit=actor.entry("cancel", task_id, {"status": task.status}),
    )


def retry_task(
    ledger: db.Ledger,
    task_id: str,
    *,
    actor: Actor = INTERNAL,
    failed_since: datetime | None = None,
) -> str:
    """Continue a parked or failed task from its last checkpoint, once the operator fixed the cause.

    The task is queued again and a `start` command continues the graph where it
    stopped: LangGraph re-runs the node that parked or raised, and finished
    steps are not repeated. Answers already given stay given, so nothing is
    asked again. A task parked on an expired question is reopened instead, so
    the question gets a deadline.

    Any failed task can be retried, not only one that failed in the build: a
    task fails only when one of its nodes raised (`coordinator.runner`), so it
    never has an outcome (its `done` node did not run), and its last checkpoint
    lies before the node that raised. Every node is written to be re-run from
    its first line (the crash rules already re-run any of them after a
    `kill -9`, docs/architecture.md §4): a failed model call is made again, a
    failed build runs again, a publish or Confluence write checks its recorded
    side effect first. What a retry needs is the checkpoints, so a failed task
    whose checkpoints were pruned, or are due for it (last changed before
    `failed_since`, i.e. longer ago than the retention), is refused: submit it
    again. `done` and `cancelled` tasks are finished and refused.

    Args:
        failed_since: now minus the checkpoint retention (None: the checkpoints
            are kept for ever).

    Returns:
        The id of the queued command.

    Raises:
        UnknownTaskError: no such task.
        TaskRefusedError: the task is not parked or failed, is parked on an
            expired question, or lost its checkpoints.
    """
    task = db.get_task(ledger, task_id)
    if task is None:
        raise UnknownTaskError(f"no task {task_id!r}; list them with `agent-team tasks`")
    if task.status == TaskStatus.PARKED:
        if task.parked_reason == "question_expired":
            expired = [
                q.question_id
                for q in db.list_questions(ledger, thread_id=task_id)
                if q.status == QuestionStatus.EXPIRED
            ]
            which = expired[-1] if expired else "<question id>"
            raise TaskRefusedError(
                f"task {task_id} waits on an expired question; reopen it: agent-team reopen {which}"
            )
        was = f"was parked: {task.parked_reason}"
        detail: dict[str, Any] = {"parked_reason": task.parked_reason}
    elif task.status == TaskStatus.FAILED:
        if task.checkpoints_pruned_at is not None or (
            failed_since is not None and db.from_iso(task.updated_at) < failed_since
        ):
            raise TaskRefusedError(
                f"task {task_id} failed longer ago than AGENT_TEAM_CHECKPOINT_RETENTION, so its "
                "checkpoints are pruned and it cannot continue; submit it again"
            )
        was = f"failed in {task.phase}"
        detail = {"status": task.status, "phase": task.phase}
    elif task.status in TERMINAL_STATUSES:
        raise TaskRefusedError(
            f"task {task_id} is {task.status}; only parked and failed tasks are retried "
            "(submit it again for new work)"
        )
    else:
        raise TaskRefusedError(
            f"task {task_id} is {task.status}: it is still going, and only parked and failed "
            f"tasks are retried; follow it with `agent-team show {task_id}`"
        )
    command_id = f"retry:{task_id}:{uuid.uuid4().hex[:8]}"
    if not db.requeue_task(
        ledger,
        task_id=task_id,
        command_id=command_id,
        note=f"retried by an operator ({was})",
        audit=actor.entry("retry", task_id, detail),
        from_status=task.status,
        changed_since=failed_since if task.status == TaskStatus.FAILED else None,
    ):
        raise TaskRefusedError(
            f"task {task_id} is no longer {task.status} (retried or changed meanwhile); "
            "nothing was queued"
        )
    return command_id


def deadline_for(kind: str, deadlines: dict[str, timedelta], now: datetime) -> datetime:
    """`now` plus the configured window for a question kind (24 h if none is set)."""
    return now + deadlines.get(kind, timedelta(hours=24))


def submit_answer(
    ledger: db.Ledger,
    question_id: str,
    text: str | dict[str, Any],
    *,
    via: str,
    now: datetime,
    events: Sequence[db.NewPrEvent] = (),
) -> db.Question:
    """Validate `text` for the question's kind and record it if it is the first answer.

    `text` is what a person wrote, or an answer already in its normalised shape (the
    LangGraph API maps Agent Inbox's choices to one); both are validated the same way.
    A pull request gate is answered by GitHub only (`via` `github:...`), naming the
    `events` it acts on: an event acted on already refuses the answer (docs §3).

    Returns:
        The answered question.

    Raises:
        UnknownTaskError: no such question.
        InvalidAnswerError: outside the kind's grammar; the question stays open.
        QuestionClosedError: someone else won, or it expired / was superseded.
    """
    question = db.get_question(ledger, question_id)
    if question is None:
        raise UnknownTaskError(
            f"no question {question_id!r}; list open ones with `agent-team questions --status open`"
        )
    if question.status != QuestionStatus.OPEN:
        raise QuestionClosedError(closed_message(question))
    if question.kind == QuestionKind.PULL_REQUEST and not via.startswith("github:"):
        raise InvalidAnswerError(PULL_REQUEST_HELP)
    normalised = parse_answer(question.kind, text)
    if (
        question.kind == QuestionKind.PR_DECISION
        and normalised.get("decision") in ("merged", "closed")
        and not via.startswith("github:")
    ):
        raise InvalidAnswerError(PR_DECISION_HELP)
    decision = normalised.get("decision")
    won = db.answer_question(
        ledger,
        question_id=question_id,
        answer_json=json.dumps(normalised, sort_keys=True),
        answered_via=via,
        answered_at=now,
        audit=Actor.from_via(via).entry(
            "answer", question_id, {"task": question.thread_id, "decision": decision or "reply"}
        ),
        events=events,
    )
    latest = db.get_question(ledger, question_id)
    assert latest is not None
    if not won:
        raise QuestionClosedError(closed_message(latest))
    return latest
