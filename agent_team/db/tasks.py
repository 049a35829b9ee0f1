"""The `tasks` table: our own durable record of each task, kept after its checkpoints are pruned."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from agent_team.db.audit import AuditEntry, append_audit
from agent_team.db.clock import to_iso, utc_now
from agent_team.db.commands import insert_command
from agent_team.db.ledger import (
    Dialect,
    Ledger,
    Reader,
    Transaction,
    where_equal,
    write_statement,
)
from agent_team.db.records import Task, fetch_record, fetch_records
from agent_team.db.retention import forget_finished
from agent_team.db.transitions import _transition
from agent_team.db.validate import require_member, require_park_reason
from agent_team.exceptions import LedgerInputError, ModelsDownError
from agent_team.task_model import TERMINAL_STATUSES, CommandKind, Phase, TaskKind, TaskStatus

__all__ = [
    "StartCommand",
    "count_tasks_by_status",
    "create_task",
    "due_model_parks",
    "finished_unpruned",
    "get_task",
    "list_tasks",
    "mark_checkpoints_pruned",
    "park_for_models",
    "parked_before",
    "reset_model_parks",
    "search_threads",
    "set_task_status",
    "task_filter",
]

_OPEN_QUESTION = (
    "EXISTS (SELECT 1 FROM pending_questions q WHERE q.thread_id = tasks.id AND q.status = 'open')"
)
# A LangGraph thread's status in terms of ours (see integrations/langgraph_api/shapes.py).
THREAD_STATUS_SQL: dict[str, str] = {
    "interrupted": f"(status = 'waiting' AND {_OPEN_QUESTION})",
    "busy": f"(status IN ('queued', 'running') OR (status = 'waiting' AND NOT {_OPEN_QUESTION}))",
    "idle": "status IN ('done', 'cancelled')",
    "error": "status IN ('failed', 'parked')",
}


@dataclass(frozen=True, slots=True)
class StartCommand:
    """The `start` command `create_task` queues with the task (a JSON payload)."""

    command_id: str
    payload_json: str = "{}"


# Finished tasks: their checkpoints are history once the retention has passed (a failed
# task is retried only before that, `transitions.requeue_task`).
_FINISHED = "('done', 'failed', 'cancelled')"

# Parked because every model of a call kept failing: continues by itself after a pause.
MODEL_UNAVAILABLE = ModelsDownError.parked_reason

# LIKE's wildcards and its escape character, each made literal.
_LIKE_ESCAPES = str.maketrans({"\\": "\\\\", "%": "\\%", "_": "\\_"})


def create_task(
    ledger: Ledger,
    *,
    task_id: str,
    kind: str,
    title: str,
    body: str = "",
    source: str = "cli",
    source_ref: str | None = None,
    audit: AuditEntry | None = None,
    start: StartCommand | None = None,
) -> bool:
    """Record a new task as `queued` in phase `intake` (and its audit row, in one transaction).

    With `start`, its start command is queued in the same transaction, even when
    the task exists already (a submit retried after a crash before it was queued),
    unless that task has finished.

    Returns:
        True if created; False if a task with this id already exists (unchanged).
    """
    check_new_task(task_id, kind, title)

    def work(tx: Transaction) -> bool:
        return insert_task(
            tx,
            ledger.dialect,
            task_id=task_id,
            kind=kind,
            title=title,
            body=body,
            source=source,
            source_ref=source_ref,
            audit=audit,
            start=start,
        )

    # Submissions come in bursts too (a webhook storm, a script): share commits.
    return ledger.write_together(work)


def check_new_task(task_id: str, kind: str, title: str) -> None:
    """What `insert_task` needs, checked before a transaction is begun."""
    require_member(kind, TaskKind, "task kind")
    if not task_id or not title.strip():
        raise LedgerInputError("a task needs a non-empty id and title")


def insert_task(
    tx: Transaction,
    dialect: Dialect,
    *,
    task_id: str,
    kind: str,
    title: str,
    body: str,
    source: str,
    source_ref: str | None,
    audit: AuditEntry | None,
    start: StartCommand | None,
) -> bool:
    """`create_task`'s writes inside a caller's transaction (`check_new_task` first)."""
    now = to_iso(utc_now())  # taken under the write lock, so times follow commit order
    cur = tx.execute(
        "INSERT INTO tasks (id, kind, source, source_ref, title, body, status, phase, "
        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'queued', 'intake', ?, ?) "
        "ON CONFLICT (id) DO NOTHING",
        (task_id, kind, source, source_ref, title, body, now, now),
    )
    created = cur.rowcount == 1
    if created and audit is not None:
        append_audit(tx, audit)
    # A finished task starts nothing: its `start` command may be pruned already
    # (`db.retention`), so that id would no longer stop a second one.
    if start is not None and (created or not _finished(tx, task_id)):
        insert_command(
            tx,
            dialect,
            start.command_id,
            CommandKind.START.value,
            task_id,
            start.payload_json,
        )
    return created


def _finished(tx: Transaction, task_id: str) -> bool:
    row = tx.fetch_one("SELECT status FROM tasks WHERE id = ?", (task_id,))
    return row is not None and row["status"] in TERMINAL_STATUSES


def get_task(ledger: Reader, task_id: str) -> Task | None:
    return fetch_record(ledger, Task, "SELECT * FROM tasks WHERE id = ?", (task_id,))


def task_filter(
    *,
    status: str | None = None,
    kind: str | None = None,
    source: str | None = None,
    title_contains: str | None = None,
) -> tuple[str, list[object]]:
    """The `WHERE` clause `list_tasks` and `count_tasks` share, so a page and its count agree.

    `title_contains` matches anywhere in the title, ignoring case (`LOWER` on
    both sides: ASCII letters on SQLite, every letter where `LOWER` knows
    Unicode). `%`, `_` and `\\` in it are escaped, so they match only themselves.
    """
    if status is not None:
        require_member(status, TaskStatus, "task status")
    if kind is not None:
        require_member(kind, TaskKind, "task kind")
    where, params = where_equal({"status": status, "kind": kind, "source": source})
    if title_contains:
        like = "%" + title_contains.translate(_LIKE_ESCAPES) + "%"
        where += (" AND " if where else "WHERE ") + "LOWER(title) LIKE LOWER(?) ESCAPE '\\'"
        params.append(like)
    return where, params


def list_tasks(
    ledger: Reader,
    status: str | None = None,
    kind: str | None = None,
    limit: int = 50,
    offset: int = 0,
    *,
    source: str | None = None,
    title_contains: str | None = None,
) -> list[Task]:
    """Tasks newest first, optionally filtered (see `task_filter`)."""
    where, params = task_filter(
        status=status, kind=kind, source=source, title_contains=title_contains
    )
    if limit < 1 or offset < 0:
        raise LedgerInputError("list_tasks needs limit >= 1 and offset >= 0")
    return fetch_records(
        ledger,
        Task,
        f"SELECT * FROM tasks {where} ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )


_THREAD_COLUMNS = frozenset({"id", "kind", "source", "status", "phase", "title"})
_THREAD_ORDER = {"created_at": "created_at", "updated_at": "updated_at", "thread_id": "id"}


def search_threads(
    ledger: Reader,
    *,
    thread_status: str | None = None,
    ids: Sequence[str] | None = None,
    equal: dict[str, str] | None = None,
    sort_by: str = "created_at",
    descending: bool = True,
    limit: int = 10,
    offset: int = 0,
) -> list[Task]:
    """Tasks as the LangGraph API's `threads.search` filters and sorts them.

    Args:
        thread_status: `interrupted`, `busy`, `idle` or `error` (`THREAD_STATUS_SQL`).
        equal: column -> value, for the columns in `_THREAD_COLUMNS`.
        sort_by: `created_at`, `updated_at` or `thread_id`.
    """
    clauses: list[str] = []
    params: list[object] = []
    if thread_status is not None:
        if thread_status not in THREAD_STATUS_SQL:
            raise LedgerInputError(f"unknown thread status {thread_status!r}")
        clauses.append(THREAD_STATUS_SQL[thread_status])
    if ids is not None:
        if not ids:
            return []
        clauses.append(f"id IN ({', '.join('?' for _ in ids)})")
        params.extend(ids)
    for column, value in (equal or {}).items():
        if column not in _THREAD_COLUMNS:
            raise LedgerInputError(f"threads cannot be filtered by {column!r}")
        clauses.append(f"{column} = ?")
        params.append(value)
    if sort_by not in _THREAD_ORDER:
        raise LedgerInputError(f"threads cannot be sorted by {sort_by!r}")
    if limit < 1 or offset < 0:
        raise LedgerInputError("search_threads needs limit >= 1 and offset >= 0")
    where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
    way = "DESC" if descending else "ASC"
    return fetch_records(
        ledger,
        Task,
        f"SELECT * FROM tasks {where}ORDER BY {_THREAD_ORDER[sort_by]} {way}, rowid {way} "
        "LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )


def set_task_status(
    ledger: Ledger,
    task_id: str,
    status: str,
    *,
    phase: str | None = None,
    parked_reason: str | None = None,
) -> bool:
    """Set a task's status (and phase, if given).

    `parked_reason` is kept only while the task is parked; any other status
    clears it. `resume_at` is cleared always: only `park_for_models` sets it,
    so a stale time never outlives its park.

    Returns:
        True if the task exists and was updated.
    """
    require_member(status, TaskStatus, "task status")
    if phase is not None:
        require_member(phase, Phase, "phase")
    reason = require_park_reason(parked_reason) if status == TaskStatus.PARKED else None

    def work(tx: Transaction) -> bool:
        now = to_iso(utc_now())  # taken under the write lock, so times follow commit order
        # `resume_at` belongs to a `model_unavailable` park alone, which this never sets.
        cur = tx.execute(
            "UPDATE tasks SET status = ?, phase = COALESCE(?, phase), parked_reason = ?, "
            "resume_at = NULL, updated_at = ? WHERE id = ?",
            (status, phase, reason, now, task_id),
        )
        return cur.rowcount == 1

    return ledger.write(work)


def park_for_models(
    ledger: Ledger,
    task_id: str,
    *,
    pauses: Sequence[timedelta],
    now: datetime,
    at_least: timedelta = timedelta(0),
    note: Callable[[datetime], str] | None = None,
) -> datetime | None:
    """Park a task whose models are all down, with the pause it waits before it continues.

    One transaction: the task becomes `parked` (`model_unavailable`), its
    `model_parks` count goes up by one and `resume_at` is `now` plus the pause
    that count picks: the first park waits `pauses[0]`, the next `pauses[1]`,
    and so on, the last pause repeating. A provider that stays down is asked
    less and less often; `reset_model_parks` starts the count over once a call
    answers. `at_least` is the longest `retry-after` a provider asked for: the
    pause is never shorter. `note(resume_at)` is the park's history row, written
    in the same transaction, so the inbox never shows the park without it.

    Returns:
        When the task continues by itself (`due_model_parks`); None if there is
        no such task.

    Raises:
        LedgerInputError: no pauses, or one that is not positive.
    """
    if not pauses or any(pause <= timedelta(0) for pause in pauses):
        raise LedgerInputError("park_for_models needs pauses, each longer than 0")

    def work(tx: Transaction) -> datetime | None:
        row = tx.fetch_one("SELECT model_parks, phase FROM tasks WHERE id = ?", (task_id,))
        if row is None:
            return None
        parks = int(row["model_parks"])
        resume_at = now + max(pauses[min(parks, len(pauses) - 1)], at_least)
        tx.execute(
            "UPDATE tasks SET status = ?, parked_reason = ?, model_parks = ?, resume_at = ?, "
            "updated_at = ? WHERE id = ?",
            (
                TaskStatus.PARKED.value,
                MODEL_UNAVAILABLE,
                parks + 1,
                to_iso(resume_at),
                to_iso(utc_now()),
                task_id,
            ),
        )
        if note is not None:
            _transition(tx, task_id, str(row["phase"]), TaskStatus.PARKED.value, note(resume_at))
        return resume_at

    return ledger.write(work)


def reset_model_parks(ledger: Ledger, task_id: str) -> None:
    """Start a task's count of `model_unavailable` parks over: a model call answered.

    The model caller calls this after every call that answered, so it reads
    first and writes only when there is a count to clear: a call on a task
    that never parked costs no write transaction (and no fsync).
    """
    row = ledger.fetch_one("SELECT model_parks FROM tasks WHERE id = ?", (task_id,))
    if row is None or int(row["model_parks"]) == 0:
        return
    # The condition again in the write: a count cleared meanwhile is not written twice.
    write_statement(
        ledger,
        "UPDATE tasks SET model_parks = 0 WHERE id = ? AND model_parks > 0",
        (task_id,),
        flush=False,
    )


def due_model_parks(ledger: Reader, *, now: datetime) -> list[Task]:
    """Tasks parked `model_unavailable` whose pause is over (`resume_at <= now`), oldest first.

    The timers pass asks this every few seconds; the partial index
    `idx_tasks_resume_at` holds only the tasks with a pause running.
    """
    return fetch_records(
        ledger,
        Task,
        "SELECT * FROM tasks WHERE resume_at IS NOT NULL AND resume_at <= ? "
        "AND status = 'parked' AND parked_reason = ? ORDER BY resume_at",
        (to_iso(now), MODEL_UNAVAILABLE),
    )


def count_tasks_by_status(ledger: Reader) -> dict[str, int]:
    """Tasks per status, every status present (0 when none)."""
    counts = {status.value: 0 for status in TaskStatus}
    for row in ledger.fetch_all("SELECT status, COUNT(*) AS n FROM tasks GROUP BY status"):
        counts[row["status"]] = int(row["n"])
    return counts


def parked_before(ledger: Reader, *, reason: str, day: str) -> list[Task]:
    """Tasks parked for `reason` whose last change was before UTC `day` (`YYYY-MM-DD`).

    The budget timer asks this every few seconds, so the filter is SQL, not Python.
    """
    return fetch_records(
        ledger,
        Task,
        "SELECT * FROM tasks WHERE status = 'parked' AND parked_reason = ? AND updated_at < ? "
        "ORDER BY updated_at",
        (reason, day),
    )


def finished_unpruned(ledger: Reader, *, older_than: datetime, limit: int) -> list[Task]:
    """Finished tasks last changed before `older_than` that still keep their checkpoints.

    At most `limit`, in index order (per status, roughly oldest first) rather
    than sorted: a sort would read the whole backlog, and one retention pass
    must stay short however big that is. The partial index `idx_tasks_unpruned`
    holds only tasks not pruned yet, so the cost does not grow with history.
    """
    if limit < 1:
        raise LedgerInputError("finished_unpruned needs limit >= 1")
    return fetch_records(
        ledger,
        Task,
        "SELECT * FROM tasks WHERE checkpoints_pruned_at IS NULL "
        f"AND status IN {_FINISHED} AND updated_at < ? LIMIT ?",
        (to_iso(older_than), limit),
    )


def mark_checkpoints_pruned(ledger: Ledger, task_ids: Sequence[str], *, at: datetime) -> int:
    """Record that finished tasks' checkpoints were deleted, all in one transaction.

    Each task marked also loses the rows nothing reads once it is finished (its
    done commands, its released lease: `retention.forget_finished`), in the
    same transaction. `updated_at` is left alone: it stays the moment the task
    finished.

    Returns:
        How many were marked; unknown, live and already marked tasks are not.
    """
    if not task_ids:
        return 0
    stamp = to_iso(at)

    def work(tx: Transaction) -> int:
        marked = 0
        for task_id in task_ids:
            cur = tx.execute(
                "UPDATE tasks SET checkpoints_pruned_at = ? WHERE id = ? "
                f"AND checkpoints_pruned_at IS NULL AND status IN {_FINISHED}",
                (stamp, task_id),
            )
            if cur.rowcount == 1:
                forget_finished(tx, task_id)
                marked += 1
        return marked

    return ledger.write(work)
