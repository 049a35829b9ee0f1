"""Automations and the claim gate on every backend: one run per slot, whoever races for it."""

from __future__ import annotations

from typing import Any

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInputError, LedgerIntegrityError
from tests.integration.ledger.test_races import race

SLOT = "2026-12-07T08:00:00.000000Z"
NEXT = "2026-12-07T09:00:00.000000Z"


def make(ledger: db.Ledger, automation_id: str = "a1", name: str = "hourly") -> db.Automation:
    return db.create_automation(
        ledger,
        values={
            "automation_id": automation_id,
            "name": name,
            "title": "Review bumps",
            "body": "Look at open dependency bumps",
            "schedule_kind": "every",
            "every_s": 3600,
            "first_run_at": SLOT,
            "next_run_at": SLOT,
            "created_by": "cli:ada",
        },
    )


def claim(ledger: db.Ledger, automation: db.Automation, by: str = "x", **over: Any) -> Any:
    args: dict[str, Any] = {
        "automation_id": automation.automation_id,
        "expected_next": automation.next_run_at,
        "slot_at": SLOT,
        "next_run_at": NEXT,
        "missed": 0,
        "run_id": f"{automation.automation_id}@{SLOT}",
        "task_id": "t-run-1",
        "claimed_by": by,
    }
    args.update(over)
    return db.claim_slot(ledger, **args)


def test_racing_claimers_make_one_run_and_move_the_schedule_once(ledger: db.Ledger) -> None:
    automation = make(ledger)
    runs = race(8, lambda n: claim(ledger, automation, by=f"w{n}"))
    won = [run for run in runs if run is not None]
    assert len(won) == 1 and won[0].status == "claimed"
    after = db.get_automation(ledger, "hourly")
    assert after is not None and (after.next_run_at, after.last_slot_at) == (NEXT, SLOT)
    assert [r.run.run_id for r in db.list_runs(ledger, "a1")] == [won[0].run_id]
    assert db.claimed_runs(ledger) == won


def test_a_claimer_that_read_an_old_slot_or_a_clock_that_went_back_claims_nothing(
    ledger: db.Ledger,
) -> None:
    automation = make(ledger)
    assert claim(ledger, automation) is not None
    assert claim(ledger, automation) is None, "the schedule moved on: the read is stale"
    moved = db.get_automation(ledger, "a1")
    assert moved is not None
    # Even with the current `next_run_at`, a slot that already has its run is not run again.
    assert claim(ledger, moved, next_run_at="2026-12-07T10:00:00.000000Z") is None
    assert len(db.list_runs(ledger, "a1")) == 1


def test_a_paused_or_cancelled_automation_is_not_claimed(ledger: db.Ledger) -> None:
    automation = make(ledger)
    assert db.set_automation_status(ledger, "a1", status="paused", from_statuses=("active",))
    assert claim(ledger, automation) is None
    assert db.due_automations(ledger, db.from_iso(NEXT)) == []
    assert not db.set_automation_status(ledger, "a1", status="paused", from_statuses=("active",)), (
        "paused already"
    )
    assert db.set_automation_status(
        ledger, "a1", status="active", from_statuses=("paused",), next_run_at=SLOT
    )
    assert [a.automation_id for a in db.due_automations(ledger, db.from_iso(NEXT))] == ["a1"]


def test_overlap_skip_records_the_run_as_skipped_while_the_previous_task_is_open(
    ledger: db.Ledger,
) -> None:
    automation = make(ledger)
    first = claim(ledger, automation, skip_if_open=True)
    assert first is not None and first.status == "claimed"
    moved = db.get_automation(ledger, "a1")
    assert moved is not None
    second = claim(
        ledger,
        moved,
        slot_at=NEXT,
        next_run_at="2026-12-07T10:00:00.000000Z",
        run_id="a1@2",
        task_id="t-run-2",
        skip_if_open=True,
    )
    assert second is not None and second.status == "skipped_overlap"
    assert "t-run-1 is still open" in (second.detail or "")
    assert second.finished_at is not None
    # Once the first run's task exists and is done, the next slot runs.
    db.create_task(ledger, task_id="t-run-1", kind="code", title="Review bumps")
    assert db.finish_run(ledger, run_id=first.run_id, status="created")
    db.set_task_status(ledger, "t-run-1", "done")
    latest = db.get_automation(ledger, "a1")
    assert latest is not None
    third = claim(
        ledger,
        latest,
        slot_at="2026-12-07T10:00:00.000000Z",
        next_run_at="2026-12-07T11:00:00.000000Z",
        run_id="a1@3",
        task_id="t-run-3",
        skip_if_open=True,
    )
    assert third is not None and third.status == "claimed"
    views = db.list_runs(ledger, "a1")
    assert [(v.run.run_id, v.run.status, v.task_status) for v in views] == [
        ("a1@3", "claimed", None),
        ("a1@2", "skipped_overlap", None),
        (first.run_id, "created", "done"),
    ]
    assert db.last_runs(ledger)["a1"].run.run_id == "a1@3"


def test_finish_is_a_compare_and_set(ledger: db.Ledger) -> None:
    run = claim(ledger, make(ledger))
    assert db.finish_run(ledger, run_id=run.run_id, status="skipped_budget", detail="cap")
    assert not db.finish_run(ledger, run_id=run.run_id, status="created"), "finished already"
    finished = db.get_run(ledger, run.run_id)
    assert finished is not None and (finished.status, finished.detail) == ("skipped_budget", "cap")
    with pytest.raises(LedgerInputError):
        db.finish_run(ledger, run_id=run.run_id, status="claimed")
    with pytest.raises(LedgerInputError):
        db.finish_run(ledger, run_id=run.run_id, status="bogus")


def test_a_name_is_unique_among_automations_that_are_not_cancelled(ledger: db.Ledger) -> None:
    make(ledger)
    with pytest.raises(LedgerIntegrityError):
        make(ledger, "a2")
    assert db.set_automation_status(
        ledger, "a1", status="cancelled", from_statuses=("active", "paused")
    )
    again = make(ledger, "a2")
    assert db.get_automation(ledger, "hourly") == again, "the name finds the live one"
    assert [a.automation_id for a in db.list_automations(ledger)] == ["a2"]
    assert [a.automation_id for a in db.list_automations(ledger, status="cancelled")] == ["a1"]


def test_an_update_is_refused_if_someone_changed_it_since_it_was_read(ledger: db.Ledger) -> None:
    automation = make(ledger)
    assert db.update_automation(
        ledger,
        "a1",
        changes={"title": "New"},
        expected_updated_at=automation.updated_at,
        audit=db.AuditEntry("ada", "cli", "automation.update", "a1"),
    )
    assert not db.update_automation(
        ledger, "a1", changes={"title": "Stale"}, expected_updated_at=automation.updated_at
    )
    current = db.get_automation(ledger, "a1")
    assert current is not None and current.title == "New"
    assert [row.action for row in db.list_audit(ledger)] == ["automation.update"]
    with pytest.raises(LedgerInputError):
        db.update_automation(ledger, "a1", changes={"status": "x"}, expected_updated_at="")


def outcome_rows(ledger: db.Ledger) -> list[tuple[str, str, str, dict[str, Any]]]:
    """The runs' outcomes in the audit log, oldest first: (action, actor, via, detail)."""
    rows = db.list_audit(ledger, action="automation.run.")
    return [(r.action, r.actor, r.via, r.detail_dict) for r in reversed(rows)]


def test_each_outcome_is_one_audit_row_written_with_it_and_the_chain_holds(
    ledger: db.Ledger,
) -> None:
    automation = make(ledger)
    first = claim(ledger, automation, skip_if_open=True)
    assert outcome_rows(ledger) == [], "a claim is not an outcome"
    moved = db.get_automation(ledger, "a1")
    assert moved is not None
    skipped = claim(
        ledger,
        moved,
        slot_at=NEXT,
        next_run_at="2026-12-07T10:00:00.000000Z",
        missed=2,
        run_id="a1@2",
        task_id="t-run-2",
        skip_if_open=True,
    )
    assert skipped is not None and skipped.status == "skipped_overlap"
    assert db.finish_run(ledger, run_id=first.run_id, status="created", detail="task t-run-1")
    assert not db.finish_run(ledger, run_id=first.run_id, status="failed"), "finished already"
    assert not db.finish_run(ledger, run_id="a1@2", status="created"), "skipped at the claim"

    assert outcome_rows(ledger) == [
        (
            "automation.run.skipped_overlap",
            "hourly",
            "automation",
            {
                "run": "a1@2",
                "slot": NEXT,
                "manual": False,
                "missed": 2,
                "reason": "the previous run's task t-run-1 is still open",
            },
        ),
        (
            "automation.run.created",
            "hourly",
            "automation",
            {"run": first.run_id, "slot": SLOT, "manual": False, "missed": 0, "task": "t-run-1"},
        ),
    ]
    assert {row.target for row in db.list_audit(ledger)} == {"a1"}
    with ledger.snapshot() as view:
        verdict = db.verify_audit(view)
    assert verdict.ok and verdict.rows == 2


def test_racing_finishers_write_one_outcome_and_one_audit_row(ledger: db.Ledger) -> None:
    run = claim(ledger, make(ledger))
    statuses = ["created", "skipped_budget", "failed", "created"] * 2
    won = race(8, lambda n: db.finish_run(ledger, run_id=run.run_id, status=statuses[n]))
    assert won.count(True) == 1
    finished = db.get_run(ledger, run.run_id)
    assert finished is not None
    (row,) = outcome_rows(ledger)
    assert row[0] == f"automation.run.{finished.status}"


def test_racing_manual_claims_with_skip_make_one_run_and_audit_each_skipped_one(
    ledger: db.Ledger,
) -> None:
    automation = make(ledger)
    made = race(
        8,
        lambda n: claim(
            ledger,
            automation,
            expected_next=None,
            next_run_at=None,
            slot_at=f"2026-12-07T08:30:0{n}.000000Z",
            run_id=f"a1@now{n}",
            task_id=f"t-now-{n}",
            manual=True,
            skip_if_open=True,
            audit=db.AuditEntry("ada", "cli", "automation.run_now", "a1"),
        ),
    )
    assert sorted(run.status for run in made) == ["claimed"] + ["skipped_overlap"] * 7
    assert [row[0] for row in outcome_rows(ledger)] == ["automation.run.skipped_overlap"] * 7
    assert {row[3]["manual"] for row in outcome_rows(ledger)} == {True}
    assert len(db.list_audit(ledger, action="automation.run_now")) == 8
    after = db.get_automation(ledger, "a1")
    assert after is not None and after.next_run_at == SLOT, "run-now leaves the schedule alone"
