"""The `pending_questions` ledger: one row per gate ask (docs/architecture.md §3).

Every state change is a compare-and-set on the row's status inside one
`BEGIN IMMEDIATE` transaction on its own connection, so the first writer wins
and every other caller gets `False` and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from agent_team.db.audit import AuditEntry, append_audit
from agent_team.db.clock import to_iso, utc_now
from agent_team.db.commands import insert_command
from agent_team.db.ledger import Ledger, Reader, Transaction, where_equal, write_statement
from agent_team.db.pull_requests import NewPrEvent, insert_pr_events, pr_events_taken
from agent_team.db.records import Question, fetch_record, fetch_records
from agent_team.db.validate import require_json, require_member
from agent_team.exceptions import LedgerInputError, LedgerIntegrityError
from agent_team.task_model import CommandKind, QuestionKind, QuestionStatus

__all__ = [
    "answer_question",
    "answered_without_resume",
    "ensure_question",
    "expire_question",
    "find_open_question_by_channel_ref",
    "find_open_question_kind_by_channel_ref",
    "get_question",
    "list_questions",
    "overdue_questions",
    "record_delivery",
    "reopen_question",
    "resume_command_id",
    "supersede_question",
]

_OPEN = QuestionStatus.OPEN.value
# Tasks that may still run, so may still wait on an answer.
_LIVE_TASKS = "('queued', 'running', 'waiting', 'parked')"


def resume_command_id(question_id: str) -> str:
    """The id of the resume command an answer creates; one per question, ever."""
    return f"resume:{question_id}"


def ensure_question(
    ledger: Ledger,
    *,
    question_id: str,
    thread_id: str,
    turn: int,
    kind: str,
    transport: str,
    deadline_at: datetime | None,
    payload_json: str | None,
) -> bool:
    """Insert the question row unless it exists; a re-run gate node calls this again.

    Returns:
        True if this call created the row, False if it was already there
        (the existing row is left exactly as it was).

    Raises:
        LedgerInputError: a kind outside the allowed set, a turn below 1, or a
            payload that is not JSON.
    """
    require_member(kind, QuestionKind, "question kind")
    if turn < 1:
        raise LedgerInputError(f"turn must be 1 or more, got {turn}")
    require_json(payload_json, "the question payload")
    deadline = to_iso(deadline_at) if deadline_at is not None else None
    # A resumed gate node asks again: a read answers that without a write transaction.
    if (
        ledger.fetch_one("SELECT 1 FROM pending_questions WHERE question_id = ?", (question_id,))
        is not None
    ):
        return False
    return (
        write_statement(
            ledger,
            "INSERT INTO pending_questions (question_id, thread_id, turn, kind, status, "
            "transport, deadline_at, payload_json) VALUES (?, ?, ?, ?, 'open', ?, ?, ?) "
            "ON CONFLICT (question_id) DO NOTHING",
            (question_id, thread_id, turn, kind, transport, deadline, payload_json),
            # The gate's `interrupt()` saves its checkpoint next, with a flush, in the same
            # step and before the question is posted anywhere (`record_delivery` flushes).
            flush=False,
        )
        == 1
    )


def record_delivery(
    ledger: Ledger,
    *,
    question_id: str,
    channel_ref: str,
    posted_at: datetime | None = None,
    flush: bool = True,
) -> bool:
    """Remember where a question was posted; only fills a missing `channel_ref` on an open row.

    `flush=False` only where nothing left the process (the local transport): then the
    row is bookkeeping, and the run's next flushed commit makes it durable.

    Raises:
        LedgerInputError: another open question already has this `channel_ref`.
    """
    if not channel_ref:
        raise LedgerInputError("channel_ref must not be empty")
    posted = to_iso(posted_at or utc_now())

    def work(tx: Transaction) -> bool:
        try:
            cur = tx.execute(
                "UPDATE pending_questions SET channel_ref = ?, posted_at = ? "
                "WHERE question_id = ? AND status = 'open' AND channel_ref IS NULL",
                (channel_ref, posted, question_id),
            )
        except LedgerIntegrityError as exc:
            raise LedgerInputError(
                f"channel_ref {channel_ref!r} already belongs to another open question; "
                "a transport must post each question as its own message"
            ) from exc
        return cur.rowcount == 1

    return ledger.write(work, flush=flush)


def answer_question(
    ledger: Ledger,
    *,
    question_id: str,
    answer_json: str,
    answered_via: str,
    answered_at: datetime | None = None,
    audit: AuditEntry | None = None,
    events: Sequence[NewPrEvent] = (),
) -> bool:
    """Record the first answer to an open, unexpired question and queue its resume.

    `events` are the pull request events the answer acts on (`db.pull_requests`):
    stored with it, and when one of them is stored already the answer is refused
    (False, nothing changes), so an event delivered twice is acted on once.

    The status flip, the `resume` command and the audit row (if given) are all
    or nothing: an answer is never stored without its resume, nor twice. Answers
    that arrive together may share one commit (`Ledger.write_together`), each in
    a savepoint of its own.

    Returns:
        True for the winning answer; False if the question is unknown, not
        open, or past its deadline (nothing changes then).

    Raises:
        LedgerInputError: `answer_json` is not valid JSON.
    """
    require_json(answer_json, "the answer")
    when = to_iso(answered_at or utc_now())

    def work(tx: Transaction) -> bool:
        if events:
            owner = tx.execute(
                "SELECT thread_id FROM pending_questions WHERE question_id = ?", (question_id,)
            ).fetchone()
            if owner is None or pr_events_taken(tx, str(owner[0]), events):
                return False
        row = tx.execute(
            "UPDATE pending_questions SET status = 'answered', answer_json = ?, "
            "answered_at = ?, answered_via = ? WHERE question_id = ? AND status = 'open' "
            "AND (deadline_at IS NULL OR deadline_at > ?) RETURNING thread_id",
            (answer_json, when, answered_via, question_id, when),
        ).fetchone()
        if row is None:
            return False
        if events:
            insert_pr_events(tx, row[0], events, at=answered_at or utc_now())
        payload = json.dumps(
            {"question_id": question_id, "answer": json.loads(answer_json)}, sort_keys=True
        )
        insert_command(
            tx,
            ledger.dialect,
            resume_command_id(question_id),
            CommandKind.RESUME.value,
            row[0],
            payload,
        )
        if audit is not None:
            append_audit(tx, audit, now=answered_at)
        return True

    return ledger.write_together(work)


def _flip(
    ledger: Ledger,
    question_id: str,
    from_statuses: tuple[str, ...],
    set_sql: str,
    params: tuple[object, ...] = (),
    audit: AuditEntry | None = None,
) -> bool:
    marks = ", ".join("?" for _ in from_statuses)
    sql = f"UPDATE pending_questions SET {set_sql} WHERE question_id = ? AND status IN ({marks})"

    def work(tx: Transaction) -> bool:
        if tx.execute(sql, (*params, question_id, *from_statuses)).rowcount != 1:
            return False
        if audit is not None:
            append_audit(tx, audit)
        return True

    return ledger.write(work)


def expire_question(ledger: Ledger, *, question_id: str) -> bool:
    """open -> expired. A plan or publish approval never defaults to yes on timeout."""
    return _flip(ledger, question_id, (_OPEN,), "status = 'expired'")


def reopen_question(
    ledger: Ledger,
    *,
    question_id: str,
    deadline_at: datetime | None = None,
    audit: AuditEntry | None = None,
) -> bool:
    """expired -> open with a new deadline; `channel_ref` is cleared so it is delivered again."""
    deadline = to_iso(deadline_at) if deadline_at is not None else None
    return _flip(
        ledger,
        question_id,
        (QuestionStatus.EXPIRED.value,),
        "status = 'open', deadline_at = ?, channel_ref = NULL, posted_at = NULL",
        (deadline,),
        audit,
    )


def supersede_question(ledger: Ledger, *, question_id: str) -> bool:
    """open/answered/expired -> superseded: the task moved on or ended without it."""
    return _flip(
        ledger,
        question_id,
        (_OPEN, QuestionStatus.ANSWERED.value, QuestionStatus.EXPIRED.value),
        "status = 'superseded'",
    )


def find_open_question_by_channel_ref(ledger: Reader, channel_ref: str) -> str | None:
    """The open question posted at `channel_ref`; answered ones never match (anti-replay)."""
    found = find_open_question_kind_by_channel_ref(ledger, channel_ref)
    return found[0] if found else None


def find_open_question_kind_by_channel_ref(
    ledger: Reader, channel_ref: str
) -> tuple[str, str] | None:
    """`(question_id, kind)` of the open question posted at `channel_ref`, if any."""
    row = ledger.fetch_one(
        "SELECT question_id, kind FROM pending_questions WHERE channel_ref = ? AND status = 'open'",
        (channel_ref,),
    )
    return (row["question_id"], row["kind"]) if row else None


def get_question(ledger: Reader, question_id: str) -> Question | None:
    return fetch_record(
        ledger, Question, "SELECT * FROM pending_questions WHERE question_id = ?", (question_id,)
    )


def list_questions(
    ledger: Reader, status: str | None = None, thread_id: str | None = None
) -> list[Question]:
    """Questions in the order they were asked, optionally filtered."""
    if status is not None:
        require_member(status, QuestionStatus, "question status")
    where, params = where_equal({"status": status, "thread_id": thread_id})
    return fetch_records(
        ledger, Question, f"SELECT * FROM pending_questions {where} ORDER BY rowid", params
    )


def overdue_questions(ledger: Reader, now: datetime) -> list[Question]:
    """Open questions whose deadline is at or before `now`, oldest deadline first."""
    return fetch_records(
        ledger,
        Question,
        "SELECT * FROM pending_questions WHERE status = 'open' AND deadline_at IS NOT NULL "
        "AND deadline_at <= ? ORDER BY deadline_at",
        (to_iso(now),),
    )


def answered_without_resume(ledger: Reader) -> list[Question]:
    """Live tasks' answered questions whose `resume` command is missing (the sweep's repairs).

    Driven from the live tasks (`idx_tasks_status`), then each one's questions
    (`idx_questions_thread_status`): answered questions only grow with history,
    and a finished task waits on nothing, so its answers need no resume (the
    retention pass deletes its done commands). `CROSS JOIN` keeps SQLite's
    join order; PostgreSQL plans it as an inner join.
    """
    return fetch_records(
        ledger,
        Question,
        "SELECT q.* FROM tasks AS t CROSS JOIN pending_questions AS q "
        f"WHERE t.status IN {_LIVE_TASKS} AND q.thread_id = t.id AND q.status = 'answered' "
        "AND NOT EXISTS (SELECT 1 FROM commands AS c WHERE c.command_id = 'resume:' || "
        "q.question_id) ORDER BY q.rowid",
    )
