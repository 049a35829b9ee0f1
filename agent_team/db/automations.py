"""Automations (task templates on a schedule) and their runs, with the claim gate.

The claim gate: a due automation's slot is claimed by one conditional UPDATE
that moves `next_run_at` from the slot the claimer read to the next one, in
the same transaction as the `automation_runs` row for that slot (unique per
slot). Whoever loses the compare-and-set, in another thread, process or
daemon, claims nothing; a clock that jumps back finds `next_run_at` still
ahead, or the slot's run already there. The claim is written before the task
is created; the run's task id is derived from the automation and the slot,
so finishing a claimed run again after a crash never creates a second task.

Every outcome of a run (`created`, `skipped_budget`, `skipped_overlap`,
`failed`) is an audit row, `automation.run.<outcome>` by the automation (via
`automation`), appended in the transaction that writes the outcome to the run's
row: the claim for a run skipped for overlap, `finish_run` for the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_team.db.audit import AuditEntry, append_audit
from agent_team.db.clock import to_iso, utc_now
from agent_team.db.ledger import Ledger, Reader, Row, Transaction
from agent_team.db.records import Automation, AutomationRun, fetch_record, fetch_records, row_to
from agent_team.db.validate import require_member
from agent_team.exceptions import LedgerInputError
from agent_team.task_model import TERMINAL_STATUSES, AutomationRunStatus, AutomationStatus

__all__ = [
    "RUN_OUTCOME_ACTION",
    "RunView",
    "claim_slot",
    "claimed_runs",
    "create_automation",
    "due_automations",
    "finish_run",
    "get_automation",
    "get_run",
    "last_runs",
    "list_automations",
    "list_runs",
    "set_automation_status",
    "update_automation",
]

# The audit action of a run's outcome: `automation.run.created`, `automation.run.failed`, ...
RUN_OUTCOME_ACTION = "automation.run."
_REASON_MAX = 500  # a run's detail in its audit row (a refusal's message can be long)

# Columns an update may change (the rest are the automation's identity and history).
_UPDATABLE = frozenset(
    {
        "name",
        "title",
        "body",
        "kind",
        "repo",
        "schedule_kind",
        "every_s",
        "cron",
        "timezone",
        "overlap",
        "first_run_at",
        "next_run_at",
    }
)


def create_automation(
    ledger: Ledger, *, values: Mapping[str, Any], audit: AuditEntry | None = None
) -> Automation:
    """Insert an automation (every column of `automations` but the times, which are set here).

    Raises:
        LedgerIntegrityError: an automation that is not cancelled already has this name.
    """
    row = dict(values)
    now = to_iso(utc_now())
    row.update(created_at=now, updated_at=now, status=AutomationStatus.ACTIVE.value)
    columns = list(row)

    def work(tx: Transaction) -> None:
        tx.execute(
            f"INSERT INTO automations ({', '.join(columns)}) "
            f"VALUES ({', '.join('?' for _ in columns)})",
            [row[column] for column in columns],
        )
        if audit is not None:
            append_audit(tx, audit)

    ledger.write(work)
    found = get_automation(ledger, str(row["automation_id"]))
    assert found is not None  # just written
    return found


def update_automation(
    ledger: Ledger,
    automation_id: str,
    *,
    changes: Mapping[str, Any],
    expected_updated_at: str,
    audit: AuditEntry | None = None,
) -> bool:
    """Change fields of a non-cancelled automation unless someone changed it since it was read.

    Returns:
        False if it was cancelled or changed meanwhile (nothing written).
    """
    unknown = set(changes) - _UPDATABLE
    if unknown or not changes:
        raise LedgerInputError(f"cannot update automation fields {sorted(unknown) or '(none)'}")
    sets = ", ".join(f"{column} = ?" for column in changes)

    def work(tx: Transaction) -> bool:
        cur = tx.execute(
            f"UPDATE automations SET {sets}, updated_at = ? WHERE automation_id = ? "
            "AND status <> 'cancelled' AND updated_at = ?",
            [*changes.values(), to_iso(utc_now()), automation_id, expected_updated_at],
        )
        if cur.rowcount != 1:
            return False
        if audit is not None:
            append_audit(tx, audit)
        return True

    return ledger.write(work)


def set_automation_status(
    ledger: Ledger,
    automation_id: str,
    *,
    status: str,
    from_statuses: tuple[str, ...],
    next_run_at: str | None = None,
    audit: AuditEntry | None = None,
) -> bool:
    """`from_statuses` -> `status` (with a new `next_run_at` when resuming); False if not there."""
    require_member(status, AutomationStatus, "automation status")
    marks = ", ".join("?" for _ in from_statuses)
    moves_next = status == AutomationStatus.ACTIVE.value

    def work(tx: Transaction) -> bool:
        cur = tx.execute(
            "UPDATE automations SET status = ?, updated_at = ?"
            + (", next_run_at = ?" if moves_next else "")
            + f" WHERE automation_id = ? AND status IN ({marks})",
            [
                status,
                to_iso(utc_now()),
                *([next_run_at] if moves_next else []),
                automation_id,
                *from_statuses,
            ],
        )
        if cur.rowcount != 1:
            return False
        if audit is not None:
            append_audit(tx, audit)
        return True

    return ledger.write(work)


def get_automation(reader: Reader, key: str) -> Automation | None:
    """By id, else by name (the one that is not cancelled, else the newest cancelled one)."""
    found = fetch_record(
        reader, Automation, "SELECT * FROM automations WHERE automation_id = ?", (key,)
    )
    if found is not None:
        return found
    return fetch_record(
        reader,
        Automation,
        "SELECT * FROM automations WHERE name = ? "
        "ORDER BY CASE WHEN status = 'cancelled' THEN 1 ELSE 0 END, created_at DESC LIMIT 1",
        (key,),
    )


def list_automations(reader: Reader, *, status: str | None = None) -> list[Automation]:
    """By name; cancelled ones only when asked for by status."""
    if status is not None:
        require_member(status, AutomationStatus, "automation status")
        return fetch_records(
            reader,
            Automation,
            "SELECT * FROM automations WHERE status = ? ORDER BY name, created_at",
            (status,),
        )
    return fetch_records(
        reader,
        Automation,
        "SELECT * FROM automations WHERE status <> 'cancelled' ORDER BY name, created_at",
    )


def due_automations(reader: Reader, now: datetime, *, limit: int = 100) -> list[Automation]:
    """Active automations whose next slot has come, the longest due first."""
    return fetch_records(
        reader,
        Automation,
        "SELECT * FROM automations WHERE status = 'active' AND next_run_at <= ? "
        "ORDER BY next_run_at LIMIT ?",
        (to_iso(now), limit),
    )


def _open_previous_task(tx: Transaction, automation_id: str) -> str | None:
    """The previous run's task if it is still open (or not yet created), else None."""
    row = tx.fetch_one(
        "SELECT r.task_id, r.status, t.status AS task_status FROM automation_runs r "
        "LEFT JOIN tasks t ON t.id = r.task_id WHERE r.automation_id = ? "
        "AND r.status IN ('claimed', 'created') ORDER BY r.slot_at DESC LIMIT 1",
        (automation_id,),
    )
    if row is None:
        return None
    if row["status"] == AutomationRunStatus.CLAIMED.value:
        return str(row["task_id"])
    task_status = row["task_status"]
    return (
        str(row["task_id"])
        if task_status is not None and task_status not in TERMINAL_STATUSES
        else None
    )


def _audit_outcome(tx: Transaction, run: Row) -> None:
    """The outcome of `run` (an `automation_runs` row, as just written) as an audit row."""
    owner = tx.fetch_one(
        "SELECT name FROM automations WHERE automation_id = ?", (run["automation_id"],)
    )
    status = str(run["status"])
    detail: dict[str, Any] = {
        "run": run["run_id"],
        "slot": run["slot_at"],
        "manual": bool(run["manual"]),
        "missed": int(run["missed"]),
    }
    if status == AutomationRunStatus.CREATED.value:
        detail["task"] = run["task_id"]
    elif run["detail"]:
        detail["reason"] = str(run["detail"])[:_REASON_MAX]
    append_audit(
        tx,
        AuditEntry(
            actor=str(owner["name"]) if owner is not None else str(run["automation_id"]),
            via="automation",
            action=RUN_OUTCOME_ACTION + status,
            target=str(run["automation_id"]),
            detail=detail,
        ),
    )


def claim_slot(
    ledger: Ledger,
    *,
    automation_id: str,
    expected_next: str | None,
    slot_at: str,
    next_run_at: str | None,
    missed: int,
    run_id: str,
    task_id: str,
    claimed_by: str,
    claimed_at: datetime | None = None,
    manual: bool = False,
    skip_if_open: bool = False,
    audit: AuditEntry | None = None,
) -> AutomationRun | None:
    """The claim gate: move the automation's next slot on and record the slot's run, or nothing.

    A scheduled claim (`manual=False`) is the compare-and-set on `next_run_at ==
    expected_next`; a manual one (`run-now`) leaves the schedule alone and is
    kept unique by its slot. With `skip_if_open`, a run whose previous run's
    task is still open is recorded as `skipped_overlap` (no task), with its
    outcome's audit row. `audit` is the request's own row (`run-now`'s).

    Returns:
        The new run, or None if another claimer won this slot.
    """
    if missed < 0:
        raise LedgerInputError("missed slots cannot be negative")

    claimed = to_iso(claimed_at or utc_now())  # the claimer's clock: the sweep compares with it

    def work(tx: Transaction) -> AutomationRun | None:
        now = to_iso(utc_now())
        if not manual:
            cur = tx.execute(
                "UPDATE automations SET next_run_at = ?, last_slot_at = ?, updated_at = ? "
                "WHERE automation_id = ? AND status = 'active' AND next_run_at = ?",
                (next_run_at, slot_at, now, automation_id, expected_next),
            )
            if cur.rowcount != 1:
                return None
        blocking = _open_previous_task(tx, automation_id) if skip_if_open else None
        status, finished, detail = AutomationRunStatus.CLAIMED.value, None, None
        if blocking is not None:
            status, finished = AutomationRunStatus.SKIPPED_OVERLAP.value, now
            detail = f"the previous run's task {blocking} is still open"
        cur = tx.execute(
            "INSERT INTO automation_runs (run_id, automation_id, slot_at, manual, missed, "
            "status, task_id, claimed_by, claimed_at, finished_at, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                run_id,
                automation_id,
                slot_at,
                int(manual),
                missed,
                status,
                task_id,
                claimed_by,
                claimed,
                finished,
                detail,
            ),
        )
        if cur.rowcount != 1:
            return None  # this slot already has its run (a clock that went back)
        if audit is not None:
            append_audit(tx, audit.with_detail(run=run_id, status=status))
        found = tx.fetch_one("SELECT * FROM automation_runs WHERE run_id = ?", (run_id,))
        assert found is not None  # same transaction
        if status != AutomationRunStatus.CLAIMED.value:
            _audit_outcome(tx, found)
        return row_to(AutomationRun, found)

    return ledger.write(work)


def finish_run(ledger: Ledger, *, run_id: str, status: str, detail: str | None = None) -> bool:
    """claimed -> `status` (created, skipped_budget, failed), with the outcome's audit row;
    False if it was finished already (nothing written)."""
    require_member(status, AutomationRunStatus, "automation run status")
    if status == AutomationRunStatus.CLAIMED.value:
        raise LedgerInputError("a run is finished with an outcome, not `claimed`")

    def work(tx: Transaction) -> bool:
        cur = tx.execute(
            "UPDATE automation_runs SET status = ?, detail = ?, finished_at = ? "
            "WHERE run_id = ? AND status = 'claimed'",
            (status, detail, to_iso(utc_now()), run_id),
        )
        if cur.rowcount != 1:
            return False
        found = tx.fetch_one("SELECT * FROM automation_runs WHERE run_id = ?", (run_id,))
        assert found is not None  # just updated
        _audit_outcome(tx, found)
        return True

    return ledger.write(work)


def get_run(reader: Reader, run_id: str) -> AutomationRun | None:
    return fetch_record(
        reader, AutomationRun, "SELECT * FROM automation_runs WHERE run_id = ?", (run_id,)
    )


def claimed_runs(
    reader: Reader, *, claimed_before: datetime | None = None, limit: int = 100
) -> list[AutomationRun]:
    """Runs claimed but not finished (before `claimed_before`: left by a crash), oldest first."""
    cutoff = to_iso(claimed_before) if claimed_before is not None else "9999"
    return fetch_records(
        reader,
        AutomationRun,
        "SELECT * FROM automation_runs WHERE status = 'claimed' AND claimed_at < ? "
        "ORDER BY claimed_at LIMIT ?",
        (cutoff, limit),
    )


@dataclass(frozen=True, slots=True)
class RunView:
    """A run with its task's current status (None before the task exists)."""

    run: AutomationRun
    task_status: str | None


def list_runs(reader: Reader, automation_id: str, *, limit: int = 20) -> list[RunView]:
    """An automation's runs, newest slot first, with their tasks' status now."""
    rows = reader.fetch_all(
        "SELECT r.*, t.status AS task_status FROM automation_runs r "
        "LEFT JOIN tasks t ON t.id = r.task_id WHERE r.automation_id = ? "
        "ORDER BY r.slot_at DESC LIMIT ?",
        (automation_id, limit),
    )
    return [_run_view(row) for row in rows]


def last_runs(reader: Reader) -> dict[str, RunView]:
    """Each automation's newest run (for the list and the inbox), by automation id.

    Driven from the automations that are not cancelled, one index lookup each.
    """
    rows = reader.fetch_all(
        "SELECT r.*, t.status AS task_status FROM automations a "
        "JOIN automation_runs r ON r.automation_id = a.automation_id AND r.slot_at = ("
        "SELECT max(o.slot_at) FROM automation_runs o WHERE o.automation_id = a.automation_id) "
        "LEFT JOIN tasks t ON t.id = r.task_id WHERE a.status <> 'cancelled'"
    )
    return {str(row["automation_id"]): _run_view(row) for row in rows}


def _run_view(row: Any) -> RunView:
    fields = {key: row[key] for key in row.keys() if key != "task_status"}
    return RunView(AutomationRun(**fields), row["task_status"])
