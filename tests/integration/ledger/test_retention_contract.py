"""Contract: the checkpoint retention pass's work list, its mark, and the ledger's room."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent_team import db
from agent_team.db.storage import INCREMENTAL
from agent_team.exceptions import LedgerInputError
from agent_team.task_model import TaskStatus

FINISHED = {"done", "failed", "cancelled"}


def _one_task_per_status(ledger: db.Ledger) -> None:
    for status in TaskStatus:
        db.create_task(ledger, task_id=f"t-{status.value}", kind="code", title=status.value)
        reason = "needs_operator" if status == TaskStatus.PARKED else None
        db.set_task_status(ledger, f"t-{status.value}", status.value, parked_reason=reason)


def test_only_finished_unpruned_tasks_older_than_the_cutoff_are_due(ledger: db.Ledger) -> None:
    _one_task_per_status(ledger)
    later = db.utc_now() + timedelta(seconds=1)

    due = db.finished_unpruned(ledger, older_than=later, limit=100)

    assert {task.status for task in due} == FINISHED
    assert all(task.checkpoints_pruned_at is None for task in due)
    assert db.finished_unpruned(ledger, older_than=later - timedelta(days=1), limit=100) == []
    assert len(db.finished_unpruned(ledger, older_than=later, limit=2)) == 2
    with pytest.raises(LedgerInputError, match="limit"):
        db.finished_unpruned(ledger, older_than=later, limit=0)


def test_marking_is_a_compare_and_set_on_finished_tasks_only(ledger: db.Ledger) -> None:
    _one_task_per_status(ledger)
    now = db.utc_now()
    later = now + timedelta(seconds=1)

    assert db.mark_checkpoints_pruned(ledger, ["t-done"], at=now) == 1
    assert db.mark_checkpoints_pruned(ledger, ["t-done"], at=later) == 0, "marked once"
    live = [f"t-{status}" for status in ("queued", "running", "waiting", "parked")]
    assert db.mark_checkpoints_pruned(ledger, [*live, "nope"], at=now) == 0
    for task_id in live:
        task = db.get_task(ledger, task_id)
        assert task is not None and task.checkpoints_pruned_at is None
    assert db.mark_checkpoints_pruned(ledger, [], at=now) == 0

    marked = db.get_task(ledger, "t-done")
    assert marked is not None and marked.checkpoints_pruned_at == db.to_iso(now)
    assert marked.status == "done"
    due = db.finished_unpruned(ledger, older_than=later, limit=100)
    assert {task.id for task in due} == {"t-failed", "t-cancelled"}


def test_storage_bytes_name_our_tables_and_reclaiming_is_safe_anywhere(ledger: db.Ledger) -> None:
    sizes = db.storage_bytes(ledger)

    assert sizes["tasks"] > 0 and sizes["task_transitions"] > 0
    if ledger.dialect.name == "sqlite":
        assert db.auto_vacuum_mode(ledger) == INCREMENTAL, "a new ledger file gives pages back"
    else:
        assert db.auto_vacuum_mode(ledger) is None
    assert db.reclaim_space(ledger) == 0  # nothing deleted yet


def test_marking_several_at_once_counts_only_the_ones_it_changed(ledger: db.Ledger) -> None:
    _one_task_per_status(ledger)
    now = db.utc_now()

    marked = db.mark_checkpoints_pruned(
        ledger, ["t-done", "t-failed", "t-waiting", "t-cancelled", "t-done"], at=now
    )

    assert marked == 3
    assert db.finished_unpruned(ledger, older_than=now + timedelta(seconds=1), limit=10) == []
