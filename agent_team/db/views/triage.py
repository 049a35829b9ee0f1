"""What the triage inbox reads: everything that waits on a person, in a few indexed queries.

Each query is driven by a status index (`idx_questions_status`,
`idx_tasks_status`, `idx_automations_due`), so the inbox costs the same with
ten thousand finished tasks as with ten.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from agent_team.db.clock import to_iso
from agent_team.db.ledger import Reader
from agent_team.db.records import Automation, Task, fetch_records, row_to

__all__ = ["FailingAutomationRow", "OpenQuestionRow", "TriageRows", "triage_rows"]


@dataclass(frozen=True, slots=True)
class OpenQuestionRow:
    question_id: str
    task_id: str
    kind: str
    posted_at: str | None
    deadline_at: str | None
    task_title: str | None
    task_created_at: str | None


@dataclass(frozen=True, slots=True)
class FailingAutomationRow:
    """An automation whose newest run failed or was skipped for the budget."""

    automation_id: str
    name: str
    status: str
    detail: str | None
    at: str


@dataclass(frozen=True)
class TriageRows:
    open_questions: list[OpenQuestionRow]
    parked: list[Task]
    expired_question_of: dict[str, str]  # parked task id -> its latest expired question
    failed: list[Task]
    overdue_automations: list[Automation]
    failing_automations: list[FailingAutomationRow]
    # parked task id -> why its park said it parked (the note of its open parked row)
    park_note_of: dict[str, str] = field(default_factory=dict)


def triage_rows(reader: Reader, *, failed_since: datetime, overdue_before: datetime) -> TriageRows:
    """One read of the inbox's sources (pass a snapshot for one consistent view)."""
    questions = [
        row_to(OpenQuestionRow, row)
        for row in reader.fetch_all(
            "SELECT q.question_id, q.thread_id AS task_id, q.kind, q.posted_at, q.deadline_at, "
            "t.title AS task_title, t.created_at AS task_created_at FROM pending_questions q "
            "LEFT JOIN tasks t ON t.id = q.thread_id WHERE q.status = 'open' "
            # The PR gate waits on GitHub (reviews, CI, a merge), not on a person.
            "AND q.kind <> 'pull_request'"
        )
    ]
    parked = fetch_records(reader, Task, "SELECT * FROM tasks WHERE status = 'parked'")
    expired = {
        str(row["thread_id"]): str(row["question_id"])
        for row in reader.fetch_all(
            "SELECT q.thread_id, q.question_id FROM pending_questions q "
            "JOIN tasks t ON t.id = q.thread_id AND t.status = 'parked' "
            "WHERE q.status = 'expired' AND q.turn = (SELECT max(o.turn) FROM pending_questions o "
            "WHERE o.thread_id = q.thread_id AND o.status = 'expired')"
        )
    }
    # The open row of a parked task is the one its park wrote (`GraphRunner.park`).
    notes = {
        str(row["thread_id"]): str(row["note"])
        for row in reader.fetch_all(
            "SELECT r.thread_id, r.note FROM task_transitions r "
            "JOIN tasks t ON t.id = r.thread_id AND t.status = 'parked' "
            "WHERE r.exited_at IS NULL AND r.status = 'parked' AND r.note IS NOT NULL"
        )
    }
    failed = fetch_records(
        reader,
        Task,
        "SELECT * FROM tasks WHERE status = 'failed' AND updated_at >= ?",
        (to_iso(failed_since),),
    )
    overdue = fetch_records(
        reader,
        Automation,
        "SELECT * FROM automations WHERE status = 'active' AND next_run_at < ?",
        (to_iso(overdue_before),),
    )
    failing = [
        row_to(FailingAutomationRow, row)
        for row in reader.fetch_all(
            "SELECT a.automation_id, a.name, r.status, r.detail, "
            "COALESCE(r.finished_at, r.claimed_at) AS at FROM automations a "
            "JOIN automation_runs r ON r.automation_id = a.automation_id AND r.slot_at = ("
            "SELECT max(o.slot_at) FROM automation_runs o WHERE o.automation_id = a.automation_id) "
            "WHERE a.status <> 'cancelled' AND r.status IN ('failed', 'skipped_budget')"
        )
    ]
    return TriageRows(questions, parked, expired, failed, overdue, failing, notes)
