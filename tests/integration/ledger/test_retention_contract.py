"""Contract: the checkpoint retention pass's work list, its mark, and the ledger's room."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent_team import db
from agent_team.db.storage import INCREMENTAL
from agent_team.exceptions import FencedError, LedgerInputError
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


# -- what a pruned finished task keeps -----------------------------------------------------------


def _finished_task_with_history(ledger: db.Ledger, task_id: str, *, takeovers: int = 0) -> None:
    """A task that ran to `done` as the worker runs one: start, a gate, its resume, done."""
    db.create_task(ledger, task_id=task_id, kind="code", title=task_id)
    db.enqueue_command(ledger, command_id=f"start:{task_id}", kind="start", task_id=task_id)
    name = db.task_lease_name(task_id)
    for attempt in range(takeovers + 1):  # each lapse taken over by a new instance
        now = db.utc_now() + timedelta(minutes=attempt)
        assert db.acquire_lease(ledger, name=name, owner=f"i{attempt}", lease_s=30, now=now)
    (claim,) = db.claim_runs(ledger, consumer=f"i{takeovers}", limit=1, lease_s=30)
    assert db.complete_command(ledger, command_id=claim.command.command_id)
    db.ensure_question(
        ledger,
        question_id=f"{task_id}:q1",
        thread_id=task_id,
        turn=1,
        kind="plan_decision",
        transport="local",
        deadline_at=None,
        payload_json=None,
    )
    assert db.answer_question(
        ledger, question_id=f"{task_id}:q1", answer_json='"approve"', answered_via="cli"
    )
    (claim,) = db.claim_runs(ledger, consumer=f"i{takeovers}", limit=1, lease_s=30)
    assert db.complete_command(ledger, command_id=claim.command.command_id)
    assert db.release_lease(ledger, claim.fence)
    db.set_task_status(ledger, task_id, "done", phase="done")


def _rows(ledger: db.Ledger, sql: str, *params: object) -> list[tuple[object, ...]]:
    return [tuple(row[key] for key in row.keys()) for row in ledger.fetch_all(sql, params)]


def test_pruning_drops_done_commands_and_the_released_lease_and_keeps_the_figures(
    ledger: db.Ledger,
) -> None:
    _finished_task_with_history(ledger, "t-old", takeovers=2)
    _finished_task_with_history(ledger, "t-other")
    # A failed command stays (an operator may look for its error); so does a live task's.
    db.enqueue_command(ledger, command_id="recover:t-old:1", kind="start", task_id="t-old")
    (claim,) = db.claim_runs(ledger, consumer="i9", limit=1, lease_s=30)
    assert db.fail_command(ledger, command_id=claim.command.command_id, error="boom")
    assert db.release_lease(ledger, claim.fence)
    latencies = db.answer_resume_times(ledger)
    takeovers = db.lease_summary(ledger).takeovers_by_kind
    assert takeovers == {"task": 2}

    assert db.mark_checkpoints_pruned(ledger, ["t-old"], at=db.utc_now()) == 1

    assert _rows(ledger, "SELECT command_id, state FROM commands WHERE task_id = ?", "t-old") == [
        ("recover:t-old:1", "failed")
    ]
    assert db.get_lease(ledger, db.task_lease_name("t-old")) is None
    # The other finished task is not pruned yet: all of its rows stay.
    assert len(db.list_commands(ledger, task_id="t-other")) == 2
    assert db.get_lease(ledger, db.task_lease_name("t-other")) is not None
    # What /metrics reads is unchanged: the latency from `resumed_at`, takeovers in the tally.
    assert db.answer_resume_times(ledger) == latencies
    assert db.lease_summary(ledger).takeovers_by_kind == takeovers
    question = ledger.fetch_one(
        "SELECT resumed_at FROM pending_questions WHERE thread_id = ?", ("t-old",)
    )
    assert question is not None and question["resumed_at"] == latencies[0].done_at
    # The sweep does not queue the deleted resume again: the task is finished.
    assert db.answered_without_resume(ledger) == []


def test_a_held_lease_of_a_finished_task_is_left_to_its_holder(ledger: db.Ledger) -> None:
    _finished_task_with_history(ledger, "t-old")
    late = db.acquire_lease(ledger, name=db.task_lease_name("t-old"), owner="late", lease_s=30)
    assert late is not None

    assert db.mark_checkpoints_pruned(ledger, ["t-old"], at=db.utc_now()) == 1

    held = db.get_lease(ledger, db.task_lease_name("t-old"))
    assert held is not None and (held.owner, held.epoch) == ("late", late.epoch)
    assert db.list_commands(ledger, task_id="t-old") == []
    assert db.release_lease(ledger, late)


def test_takeovers_of_several_pruned_tasks_add_up(ledger: db.Ledger) -> None:
    _finished_task_with_history(ledger, "t-a", takeovers=1)
    _finished_task_with_history(ledger, "t-b", takeovers=3)

    assert db.mark_checkpoints_pruned(ledger, ["t-a"], at=db.utc_now()) == 1
    assert db.mark_checkpoints_pruned(ledger, ["t-b"], at=db.utc_now()) == 1

    assert db.lease_summary(ledger).takeovers_by_kind == {"task": 4}
    assert [lease.name for lease in db.list_leases(ledger, prefix="task:")] == ["task:"]


def test_a_lapsed_lease_of_a_finished_task_goes_like_a_released_one(ledger: db.Ledger) -> None:
    """The run's release failed ("it runs out by itself"): the row still names its holder."""
    _finished_task_with_history(ledger, "t-old")
    earlier = db.utc_now() - timedelta(minutes=5)
    stalled = db.acquire_lease(
        ledger, name=db.task_lease_name("t-old"), owner="stalled", lease_s=30, now=earlier
    )
    assert stalled is not None

    assert db.mark_checkpoints_pruned(ledger, ["t-old"], at=db.utc_now()) == 1

    assert db.get_lease(ledger, db.task_lease_name("t-old")) is None
    with pytest.raises(FencedError), db.fenced(stalled):  # its late writes find no lease
        db.set_task_status(ledger, "t-old", "done")


def test_an_epoch_never_goes_back_after_its_lease_row_was_pruned(ledger: db.Ledger) -> None:
    """Seed 001: a release keeps the epoch; so must retention deleting the row."""
    _finished_task_with_history(ledger, "t-old", takeovers=3)
    name = db.task_lease_name("t-old")
    before = db.get_lease(ledger, name)
    assert before is not None and before.epoch >= 4
    assert db.mark_checkpoints_pruned(ledger, ["t-old"], at=db.utc_now()) == 1
    assert db.get_lease(ledger, name) is None

    late = db.acquire_lease(ledger, name=name, owner="late", lease_s=30)
    assert late is not None and late.epoch > before.epoch
    # Another task pruned with a lower epoch does not lower the floor.
    _finished_task_with_history(ledger, "t-low")
    assert db.mark_checkpoints_pruned(ledger, ["t-low"], at=db.utc_now()) == 1
    again = db.acquire_lease(ledger, name=db.task_lease_name("t-low"), owner="late", lease_s=30)
    assert again is not None and again.epoch > before.epoch
    # Loops keep their own epochs from 1.
    loop = db.acquire_lease(ledger, name="loop:sweeper", owner="x", lease_s=30)
    assert loop is not None and loop.epoch == 1
    assert db.lease_summary(ledger).takeovers_by_kind.get("task") == 3
