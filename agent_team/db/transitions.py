"""`task_transitions`: every node a task enters, with when it left and how.

The dashboard's journey view reads these rows; a task has at most one open
row (no `exited_at`), which a partial unique index enforces.
"""

from __future__ import annotations

from datetime import datetime

from agent_team.db.audit import AuditEntry, append_audit
from agent_team.db.clock import to_iso, utc_now
from agent_team.db.commands import insert_command
from agent_team.db.fencing import current_fence
from agent_team.db.ledger import Ledger, Reader, Transaction
from agent_team.db.records import Transition, fetch_records
from agent_team.db.validate import require_member, require_park_reason
from agent_team.exceptions import LedgerInputError, ModelsDownError
from agent_team.task_model import TERMINAL_STATUSES, CommandKind, Phase, TaskStatus

__all__ = [
    "close_terminal",
    "enter_phase",
    "finish_task",
    "list_transitions",
    "record_transition",
    "reopen_for_task",
    "requeue_task",
    "resume_model_park",
]


def record_transition(
    ledger: Ledger,
    *,
    thread_id: str,
    to_phase: str,
    status: str,
    note: str | None = None,
) -> int:
    """Close the task's open row and open one for `to_phase`, in one transaction.

    LangGraph re-runs a node from its first line on resume, so entering the
    phase the task is already in with the same status is a no-op: the open
    row's id is returned and nothing is written.

    Returns:
        The id of the task's open transition row.
    """
    require_member(to_phase, Phase, "phase")
    require_member(status, TaskStatus, "task status")

    def work(tx: Transaction) -> int:
        return _transition(tx, thread_id, to_phase, status, note)

    return ledger.write(work)


def requeue_task(
    ledger: Ledger,
    *,
    task_id: str,
    command_id: str,
    note: str,
    audit: AuditEntry | None = None,
    from_status: str = TaskStatus.PARKED.value,
    changed_since: datetime | None = None,
) -> bool:
    """parked or failed -> queued, its history row, a `start` command and the audit row:
    one transaction, and a compare-and-set on the status the caller saw.

    The `start` command continues the graph from its last checkpoint, so the
    task must still have its checkpoints: a task whose checkpoints were pruned
    (`checkpoints_pruned_at`) is never queued. A failed task is finished in
    the retention pass's eyes, so the caller passes `changed_since` (now minus
    the checkpoint retention): a task last changed before it may be pruned at
    this moment and is refused too. Two retries racing queue one command; the
    other finds the status changed and writes nothing.

    Args:
        from_status: `parked` or `failed`: the status the task must still have.
        changed_since: refuse a task whose `updated_at` is before this (None: no bound).

    Returns:
        False if the task no longer qualifies (nothing written).
    """
    if from_status not in (TaskStatus.PARKED, TaskStatus.FAILED):
        raise LedgerInputError(f"requeue_task takes a parked or failed task, not {from_status!r}")
    since_sql, since = (
        ("", ()) if changed_since is None else (" AND updated_at >= ?", (to_iso(changed_since),))
    )

    def work(tx: Transaction) -> bool:
        row = tx.fetch_one(
            "SELECT phase FROM tasks WHERE id = ? AND status = ? "
            f"AND checkpoints_pruned_at IS NULL{since_sql}",
            (task_id, from_status, *since),
        )
        if row is None:
            return False
        phase = str(row["phase"])
        tx.execute(
            "UPDATE tasks SET status = ?, parked_reason = NULL, resume_at = NULL, updated_at = ? "
            "WHERE id = ?",
            (TaskStatus.QUEUED.value, to_iso(utc_now()), task_id),
        )
        # A failed task's last row is closed: the new one still says where it came from.
        _transition(tx, task_id, phase, TaskStatus.QUEUED.value, note, closed_in=phase)
        insert_command(tx, ledger.dialect, command_id, CommandKind.START.value, task_id, "{}")
        if audit is not None:
            append_audit(tx, audit)
        return True

    return ledger.write(work)


def resume_model_park(ledger: Ledger, *, task_id: str, command_id: str, now: datetime) -> bool:
    """A task parked on its models whose pause is over -> queued: one transaction.

    The timers' side of `park_for_models` (`Sweeper.unpark_models`): a
    compare-and-set on the park itself (still parked `model_unavailable`, its
    `resume_at` not after `now`), the task queued with `resume_at` cleared, its
    history row and a `start` command that continues the graph from its last
    checkpoint. A task retried or parked anew meanwhile is left alone. Its
    `model_parks` count stays, so a provider still down makes the next pause
    longer. No audit row: nobody asked, the pause ran out.

    Returns:
        False if the task no longer qualifies (nothing written).
    """
    due = to_iso(now)

    def work(tx: Transaction) -> bool:
        row = tx.fetch_one(
            "SELECT phase FROM tasks WHERE id = ? AND status = ? AND parked_reason = ? "
            "AND resume_at IS NOT NULL AND resume_at <= ?",
            (task_id, TaskStatus.PARKED.value, ModelsDownError.parked_reason, due),
        )
        if row is None:
            return False
        phase = str(row["phase"])
        tx.execute(
            "UPDATE tasks SET status = ?, parked_reason = NULL, resume_at = NULL, updated_at = ? "
            "WHERE id = ?",
            (TaskStatus.QUEUED.value, to_iso(utc_now()), task_id),
        )
        _transition(
            tx, task_id, phase, TaskStatus.QUEUED.value, "continued by itself after its pause"
        )
        insert_command(tx, ledger.dialect, command_id, CommandKind.START.value, task_id, "{}")
        return True

    return ledger.write(work)


def reopen_for_task(
    ledger: Ledger,
    *,
    question_id: str,
    deadline_at: datetime,
    note: str,
    audit: AuditEntry | None = None,
) -> bool:
    """expired -> open (to be delivered again) and its task waiting on it: one transaction.

    Returns:
        False if the question is not expired (nothing written).
    """
    deadline = to_iso(deadline_at)

    def work(tx: Transaction) -> bool:
        rows = tx.execute(
            "UPDATE pending_questions SET status = 'open', deadline_at = ?, channel_ref = NULL, "
            "posted_at = NULL WHERE question_id = ? AND status = 'expired' RETURNING thread_id",
            (deadline, question_id),
        ).fetchall()  # SQLite finishes a RETURNING statement only when it is read out
        if not rows:
            return False
        task_id = str(rows[0][0])
        task = tx.fetch_one("SELECT phase, status FROM tasks WHERE id = ?", (task_id,))
        if task is not None and task["status"] not in TERMINAL_STATUSES:
            tx.execute(
                "UPDATE tasks SET status = ?, parked_reason = NULL, resume_at = NULL, "
                "updated_at = ? WHERE id = ?",
                (TaskStatus.WAITING.value, to_iso(utc_now()), task_id),
            )
            _transition(tx, task_id, str(task["phase"]), TaskStatus.WAITING.value, note)
        if audit is not None:
            append_audit(tx, audit)
        return True

    return ledger.write(work)


def _transition(
    tx: Transaction,
    thread_id: str,
    to_phase: str,
    status: str,
    note: str | None,
    *,
    closed_in: str | None = None,
) -> int:
    """Inside a write: close the open row and open one for `to_phase` (see `record_transition`).

    `closed_in` is the `from_phase` of the new row when the task has no open row
    (it ended in that phase and is taken up again).
    """
    current = tx.execute(
        "SELECT transition_id, to_phase, status FROM task_transitions "
        "WHERE thread_id = ? AND exited_at IS NULL",
        (thread_id,),
    ).fetchone()
    # Taken after the first read, so times follow commit order on both backends: SQLite's
    # write lock is held by now; PostgreSQL's snapshot is set, and a row committed after it
    # conflicts with ours (the transaction runs again, with a later time).
    now = to_iso(utc_now())
    from_phase = closed_in
    if current is not None:
        if current[1] == to_phase and current[2] == status:
            return int(current[0])
        tx.execute(
            "UPDATE task_transitions SET exited_at = ? WHERE transition_id = ?", (now, current[0])
        )
        from_phase = current[1]
    fence = current_fence()  # the run's epoch, so a history shows who wrote each step
    rows = tx.execute(
        "INSERT INTO task_transitions (thread_id, from_phase, to_phase, entered_at, status, "
        "note, epoch) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING transition_id",
        (thread_id, from_phase, to_phase, now, status, note, fence.epoch if fence else None),
    ).fetchall()  # every row: SQLite finishes a RETURNING statement only when it is read out
    return int(rows[0][0])


def enter_phase(
    ledger: Ledger,
    *,
    task_id: str,
    phase: str,
    status: str,
    note: str | None = None,
) -> int:
    """`record_transition` and the task row's status and phase, in one transaction.

    A node entering its phase and the coordinator marking a task waiting both
    change the two together; one transaction keeps them consistent and
    halves the writes on the hot path. Parking needs a reason, so use
    `set_task_status` for it.

    Returns:
        The id of the task's open transition row.
    """
    require_member(phase, Phase, "phase")
    require_member(status, TaskStatus, "task status")
    if status == TaskStatus.PARKED:
        raise LedgerInputError("enter_phase cannot park a task; use set_task_status with a reason")

    def work(tx: Transaction) -> int:
        transition_id = _transition(tx, task_id, phase, status, note)
        tx.execute(
            "UPDATE tasks SET status = ?, phase = ?, parked_reason = NULL, resume_at = NULL, "
            "updated_at = ? WHERE id = ? "
            "AND (status != ? OR phase != ? OR parked_reason IS NOT NULL)",
            (status, phase, to_iso(utc_now()), task_id, status, phase),
        )
        return transition_id

    # History, not a decision: the run's next flushed commit (a budget row, the gate's
    # question, the build, the claim's completion) makes it durable with itself.
    return ledger.write(work, flush=False)


def park_task(ledger: Ledger, *, task_id: str, reason: str, note: str) -> bool:
    """Park a task in its phase with its history row (`note`: why, and how to go on).

    One transaction, so nobody reads a parked task whose reason is not in its
    history yet (the inbox and the task page show that row's note). A task
    parked on its models takes `park_for_models`, which sets its pause.

    Returns:
        False if there is no such task (nothing written).
    """
    require_park_reason(reason)

    def work(tx: Transaction) -> bool:
        row = tx.fetch_one("SELECT phase FROM tasks WHERE id = ?", (task_id,))
        if row is None:
            return False
        tx.execute(
            "UPDATE tasks SET status = ?, parked_reason = ?, resume_at = NULL, updated_at = ? "
            "WHERE id = ?",
            (TaskStatus.PARKED.value, reason, to_iso(utc_now()), task_id),
        )
        _transition(tx, task_id, str(row["phase"]), TaskStatus.PARKED.value, note)
        return True

    return ledger.write(work)


def close_terminal(ledger: Ledger, *, thread_id: str, status: str, note: str | None = None) -> bool:
    """Close the task's open row with its terminal status (done, failed, cancelled).

    Returns:
        True if an open row was closed; False if the task had none.
    """
    require_member(status, TaskStatus, "task status")

    return ledger.write(lambda tx: _close_open_row(tx, thread_id, status, note, to_iso(utc_now())))


def _close_open_row(
    tx: Transaction, thread_id: str, status: str, note: str | None, now: str
) -> bool:
    """Inside a write: close the task's open history row with `status`; False if none."""
    cur = tx.execute(
        "UPDATE task_transitions SET exited_at = ?, status = ?, note = COALESCE(?, note) "
        "WHERE thread_id = ? AND exited_at IS NULL",
        (now, status, note, thread_id),
    )
    return cur.rowcount == 1


def finish_task(
    ledger: Ledger, *, task_id: str, status: str, phase: str | None, note: str | None
) -> None:
    """End a task in one transaction: its open history row closed with `status`, the task
    row set to it (and `phase`), and its open or expired questions superseded.

    One commit where there were three or more; and a crash can no longer leave a task
    that says it ended with its last history row still open.
    """
    require_member(status, TaskStatus, "task status")
    if status not in TERMINAL_STATUSES:
        raise LedgerInputError(f"finish_task takes a terminal status, not {status!r}")
    if phase is not None:
        require_member(phase, Phase, "phase")

    def work(tx: Transaction) -> None:
        now = to_iso(utc_now())  # taken under the write lock, so times follow commit order
        _close_open_row(tx, task_id, status, note, now)
        tx.execute(
            "UPDATE tasks SET status = ?, phase = COALESCE(?, phase), parked_reason = NULL, "
            "resume_at = NULL, updated_at = ? WHERE id = ?",
            (status, phase, now, task_id),
        )
        tx.execute(
            "UPDATE pending_questions SET status = 'superseded' "
            "WHERE thread_id = ? AND status IN ('open', 'expired')",
            (task_id,),
        )

    # No answer, claim or side effect: the run's last commit (its command done, with a
    # flush) follows at once and makes this durable with it. Told to observers before
    # that, an end lost to a power cut is reached again by the run its claim repeats
    # (from the last durable checkpoint) and told again.
    ledger.write(work, flush=False)


def list_transitions(ledger: Reader, thread_id: str) -> list[Transition]:
    """A task's journey in the order it happened."""
    return fetch_records(
        ledger,
        Transition,
        "SELECT * FROM task_transitions WHERE thread_id = ? ORDER BY entered_at, transition_id",
        (thread_id,),
    )
