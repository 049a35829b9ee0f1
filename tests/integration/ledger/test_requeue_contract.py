"""Contract: `requeue_task`, the ledger side of `agent-team retry`, for parked and failed tasks.

One transaction: the task queued again, a history row, a `start` command and the
audit row; a compare-and-set on the status the caller saw, so racing retries
queue one command; a failed task whose checkpoints are (or may be about to be)
pruned is never queued.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInputError
from tests.integration.ledger.test_races import race


def _task_in_build(ledger: db.Ledger, task_id: str = "t1") -> None:
    db.create_task(ledger, task_id=task_id, kind="code", title="Fix login")
    for phase in ("intake", "plan", "build"):
        db.enter_phase(ledger, task_id=task_id, phase=phase, status="running")


def _failed_in_build(ledger: db.Ledger, task_id: str = "t1") -> None:
    _task_in_build(ledger, task_id)
    db.finish_task(ledger, task_id=task_id, status="failed", phase=None, note="BuildError: exit 1")


def _requeue(
    ledger: db.Ledger,
    command_id: str = "retry:t1:a",
    *,
    from_status: str = "failed",
    changed_since: datetime | None = None,
) -> bool:
    return db.requeue_task(
        ledger,
        task_id="t1",
        command_id=command_id,
        note="retried by an operator (failed in build)",
        audit=db.AuditEntry("ada", "cli", "retry", "t1", {"status": "failed"}),
        from_status=from_status,
        changed_since=changed_since,
    )


def test_a_failed_task_is_queued_again_with_its_history_command_and_audit_row(
    ledger: db.Ledger,
) -> None:
    _failed_in_build(ledger)

    assert _requeue(ledger)

    task = db.get_task(ledger, "t1")
    assert task is not None
    assert (task.status, task.phase, task.parked_reason) == ("queued", "build", None)
    *_, failed, queued = db.list_transitions(ledger, "t1")
    assert (failed.to_phase, failed.status, failed.note) == (
        "build",
        "failed",
        "BuildError: exit 1",
    )
    assert failed.exited_at is not None
    assert (queued.from_phase, queued.to_phase, queued.status, queued.exited_at) == (
        "build",
        "build",
        "queued",
        None,
    )
    assert queued.note == "retried by an operator (failed in build)"
    (command,) = db.list_commands(ledger, task_id="t1")
    assert (command.command_id, command.kind, command.state, command.payload) == (
        "retry:t1:a",
        "start",
        "pending",
        {},
    )
    (row,) = db.list_audit(ledger)
    assert (row.actor, row.via, row.action, row.target) == ("ada", "cli", "retry", "t1")
    assert db.verify_audit(ledger).ok


def test_a_parked_task_is_queued_again_as_before(ledger: db.Ledger) -> None:
    _task_in_build(ledger)
    db.set_task_status(ledger, "t1", "parked", parked_reason="builder_unavailable")
    db.record_transition(ledger, thread_id="t1", to_phase="build", status="parked")

    assert not _requeue(ledger), "it is parked, not failed: the compare-and-set refuses"
    assert db.requeue_task(ledger, task_id="t1", command_id="retry:t1:p", note="retried")

    task = db.get_task(ledger, "t1")
    assert task is not None and (task.status, task.parked_reason) == ("queued", None)
    last = db.list_transitions(ledger, "t1")[-1]
    assert (last.from_phase, last.to_phase, last.status) == ("build", "build", "queued")
    assert [c.command_id for c in db.list_commands(ledger, task_id="t1")] == ["retry:t1:p"]


@pytest.mark.parametrize("status", ["done", "cancelled", "queued", "running", "waiting"])
def test_other_statuses_are_not_queued_and_nothing_is_written(
    ledger: db.Ledger, status: str
) -> None:
    _task_in_build(ledger)
    if status in ("done", "cancelled"):
        db.finish_task(ledger, task_id="t1", status=status, phase="done", note=None)
    else:
        db.set_task_status(ledger, "t1", status)
    before = db.list_transitions(ledger, "t1")

    assert not _requeue(ledger)
    assert not db.requeue_task(ledger, task_id="t1", command_id="retry:t1:p", note="retried")

    task = db.get_task(ledger, "t1")
    assert task is not None and task.status == status
    assert db.list_transitions(ledger, "t1") == before
    assert db.list_commands(ledger) == [] and db.list_audit(ledger) == []


def test_a_failed_task_without_its_checkpoints_is_refused(ledger: db.Ledger) -> None:
    _failed_in_build(ledger)
    task = db.get_task(ledger, "t1")
    assert task is not None
    failed_at = db.from_iso(task.updated_at)

    # Changed before the retention's cutoff: the pruning pass may be deleting its thread.
    assert not _requeue(ledger, changed_since=failed_at + timedelta(microseconds=1))
    assert db.list_commands(ledger) == []
    # Pruned already.
    assert db.mark_checkpoints_pruned(ledger, ["t1"], at=failed_at) == 1
    assert not _requeue(ledger, changed_since=failed_at)
    assert not _requeue(ledger)
    assert db.list_commands(ledger) == [] and db.list_audit(ledger) == []
    pruned = db.get_task(ledger, "t1")
    assert pruned is not None and pruned.status == "failed"


def test_within_the_retention_a_failed_task_is_queued(ledger: db.Ledger) -> None:
    _failed_in_build(ledger)
    task = db.get_task(ledger, "t1")
    assert task is not None
    assert _requeue(ledger, changed_since=db.from_iso(task.updated_at))


def test_only_parked_or_failed_may_be_asked_for(ledger: db.Ledger) -> None:
    _failed_in_build(ledger)
    with pytest.raises(LedgerInputError, match="parked or failed"):
        _requeue(ledger, from_status="done")
    assert db.list_commands(ledger) == []


def test_racing_retries_of_a_failed_task_queue_one_command(ledger: db.Ledger) -> None:
    _failed_in_build(ledger)

    results = race(16, lambda i: _requeue(ledger, command_id=f"retry:t1:{i}"))

    assert results.count(True) == 1
    (command,) = db.list_commands(ledger, task_id="t1")
    assert command.command_id == f"retry:t1:{results.index(True)}"
    assert len(db.list_audit(ledger)) == 1
    assert [t.status for t in db.list_transitions(ledger, "t1")].count("queued") == 1
