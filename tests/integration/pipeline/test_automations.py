"""Automations through a real coordinator: due slots become tasks once, behind the claim gate and
the budget gate; overlap, catch-up, a clock that goes back, run-now, and the inbox."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from agent_team import db
from agent_team.automations import service
from agent_team.automations.runner import SWEEP_AFTER, run_id_for, task_id_for
from agent_team.coordinator import Coordinator
from agent_team.exceptions import LedgerBusyError
from agent_team.reports import triage
from agent_team.requests.actors import Actor
from tests.integration.pipeline.conftest import LONG_BODY, Clock, MakeCoordinator, task_of

T0 = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
ADA = Actor("ada", "cli")


def add(coordinator: Coordinator, clock: Clock, **request: Any) -> db.Automation:
    fields: dict[str, Any] = {
        "name": "bumps",
        "title": "Review dependency bumps",
        "body": LONG_BODY,
        "every": "1h",
        "first_run_at": T0.isoformat(),
    }
    fields.update(request)
    return service.create(
        coordinator.ledger, service.AutomationRequest(**fields), actor=ADA, now=clock.now
    )


def runs(coordinator: Coordinator, automation: db.Automation) -> list[db.RunView]:
    return db.list_runs(coordinator.ledger, automation.automation_id, limit=100)


def test_a_due_slot_becomes_one_task_that_runs_to_its_gate(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0 - timedelta(minutes=5))
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock)
    assert automation.next_run_at == db.to_iso(T0)
    assert coordinator.run_automations().created == 0, "not due yet"

    clock.now = T0 + timedelta(seconds=1)
    report = coordinator.run_automations()
    assert report.created == 1
    again = coordinator.run_automations()
    assert (again.created, again.finished_after_crash) == (0, 0), "one run per slot"

    (view,) = runs(coordinator, automation)
    run_id = run_id_for(automation.automation_id, db.to_iso(T0))
    assert view.run.run_id == run_id and view.run.status == "created"
    assert view.run.task_id == task_id_for(run_id)
    task = task_of(coordinator, view.run.task_id)
    assert (task.source, task.title) == ("automation", "Review dependency bumps")
    assert task.source_ref == run_id
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task.id).status == "waiting"
    moved = db.get_automation(coordinator.ledger, "bumps")
    assert moved is not None and moved.next_run_at == db.to_iso(T0 + timedelta(hours=1))
    (submitted,) = db.list_audit(coordinator.ledger, action="submit")
    assert (submitted.actor, submitted.via, submitted.target) == ("bumps", "automation", task.id)


def test_over_the_budget_a_run_is_skipped_not_failed_and_the_inbox_shows_it(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0 - timedelta(minutes=5))
    coordinator = make_coordinator(clock=clock, daily_token_cap=1000)
    automation = add(coordinator, clock)
    clock.now = T0 + timedelta(seconds=1)
    assert db.record_usage(  # the offline model has no price: the token cap applies
        coordinator.ledger,
        thread_id="t-other",
        stage="plan",
        model="offline",
        billing_mode="api",
        input_tokens=900,
        output_tokens=100,
        usd_cost=0.0,
        recorded_at=clock.now,
    )

    report = coordinator.run_automations()
    assert (report.created, report.skipped_budget, report.failed) == (0, 1, 0)
    (view,) = runs(coordinator, automation)
    assert view.run.status == "skipped_budget" and view.task_status is None
    assert "1,000 of 1,000 tokens" in (view.run.detail or "")
    assert db.list_tasks(coordinator.ledger) == []
    assert coordinator.run_automations().skipped_budget == 0, "no retry loop"

    with coordinator.ledger.snapshot() as view_now:
        items = triage.triage(view_now, now=clock.now, budget=coordinator.budget_today())
    kinds = {(item.kind, item.title) for item in items}
    assert ("automation", "bumps") in kinds
    assert ("budget", "daily budget reached") in kinds


def test_overlap_skip_waits_for_the_open_task_and_allow_runs_anyway(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0 - timedelta(minutes=5))
    coordinator = make_coordinator(clock=clock)
    skip = add(coordinator, clock, name="skip")
    allow = add(coordinator, clock, name="allow", overlap="allow")
    for hour in range(3):  # nobody answers the first tasks' plan questions
        clock.now = T0 + timedelta(hours=hour, seconds=1)
        coordinator.run_automations()
    assert [v.run.status for v in runs(coordinator, skip)] == [
        "skipped_overlap",
        "skipped_overlap",
        "created",
    ]
    assert [v.run.status for v in runs(coordinator, allow)] == ["created"] * 3
    first = runs(coordinator, skip)[-1].run
    assert f"task {first.task_id} is still open" in (runs(coordinator, skip)[0].run.detail or "")

    coordinator.cancel(first.task_id)
    coordinator.tick(until_idle=True, timeout_s=60)
    clock.now = T0 + timedelta(hours=3, seconds=1)
    coordinator.run_automations()
    assert runs(coordinator, skip)[0].run.status == "created", "runs again once it is closed"


def test_catch_up_after_a_three_day_stop_is_one_run_that_says_how_many_were_missed(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0 - timedelta(minutes=5))
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock)
    clock.now = T0 + timedelta(days=3, minutes=5)
    assert coordinator.run_automations().created == 1
    (view,) = runs(coordinator, automation)
    assert view.run.slot_at == db.to_iso(T0 + timedelta(days=3))
    assert view.run.missed == 72
    assert "72 earlier slot(s) missed" in (view.run.detail or "")
    after = db.get_automation(coordinator.ledger, "bumps")
    assert after is not None and after.next_run_at == db.to_iso(T0 + timedelta(days=3, hours=1))


def test_a_clock_that_jumps_back_makes_no_second_run(make_coordinator: MakeCoordinator) -> None:
    clock = Clock(T0 - timedelta(minutes=5))
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock)
    clock.now = T0 + timedelta(minutes=30)
    assert coordinator.run_automations().created == 1
    for back in (timedelta(minutes=29), timedelta(hours=2)):
        clock.now = T0 + timedelta(minutes=30) - back
        assert coordinator.run_automations().created == 0
    assert len(runs(coordinator, automation)) == 1


def test_run_now_makes_a_run_outside_the_schedule_and_is_audited(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0 - timedelta(minutes=5))
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock)
    run = service.run_now(
        coordinator.ledger, "bumps", runner=coordinator.automations, actor=Actor("bo", "dashboard")
    )
    assert run.status == "created" and run.manual == 1
    assert db.get_task(coordinator.ledger, run.task_id) is not None
    after = db.get_automation(coordinator.ledger, "bumps")
    assert after is not None and after.next_run_at == automation.next_run_at, "schedule kept"
    (row,) = db.list_audit(coordinator.ledger, action="automation.run_now")
    assert (row.actor, row.via, row.target) == ("bo", "dashboard", automation.automation_id)


def test_a_run_left_claimed_by_a_crash_is_finished_once_by_the_next_pass(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0 - timedelta(minutes=5))
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock)
    clock.now = T0 + timedelta(seconds=1)
    claimed = coordinator.automations.claim_due(automation, clock.now)  # ... and the process dies
    assert claimed is not None and claimed.status == "claimed"
    assert db.get_task(coordinator.ledger, claimed.task_id) is None

    restarted = make_coordinator(clock=clock)
    nothing = restarted.run_automations()
    assert nothing.finished_after_crash == 0, "its claimer may still be finishing it"
    clock.now += SWEEP_AFTER + timedelta(seconds=1)
    report = restarted.run_automations()
    assert (report.finished_after_crash, report.created) == (1, 1)
    assert restarted.run_automations().created == 0
    assert [t.id for t in db.list_tasks(restarted.ledger)] == [claimed.task_id]
    # The next slot finds that task still open (overlap `skip`).
    clock.now = T0 + timedelta(hours=1, seconds=1)
    moved = db.get_automation(restarted.ledger, "bumps")
    assert moved is not None
    second = restarted.automations.claim_due(moved, clock.now)
    assert second is not None and second.status == "skipped_overlap", "the first task is open"


def test_a_run_left_claimed_for_an_automation_cancelled_since_makes_no_task(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0 - timedelta(minutes=5))
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock)
    clock.now = T0 + timedelta(seconds=1)
    claimed = coordinator.automations.claim_due(automation, clock.now)  # then a crash
    assert claimed is not None
    service.change_status(coordinator.ledger, "bumps", "cancel", actor=ADA, now=clock.now)
    clock.now += SWEEP_AFTER + timedelta(seconds=1)
    report = coordinator.run_automations()
    assert (report.failed, report.created) == (1, 0)
    (view,) = runs(coordinator, automation)
    assert (view.run.status, view.run.detail) == ("failed", "the automation is cancelled")
    assert db.list_tasks(coordinator.ledger) == []


def test_a_database_outage_while_making_the_task_leaves_the_run_for_the_next_pass(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0 - timedelta(minutes=5))
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock)
    clock.now = T0 + timedelta(seconds=1)
    submit = coordinator.automations.submit

    def away(**_request: Any) -> str:
        raise LedgerBusyError("the ledger stayed locked")

    coordinator.automations.submit = away
    report = coordinator.run_automations()
    assert (report.created, report.failed) == (0, 0), "an outage is not the run's failure"
    (view,) = runs(coordinator, automation)
    assert view.run.status == "claimed"

    coordinator.automations.submit = submit
    clock.now += SWEEP_AFTER + timedelta(seconds=1)
    assert coordinator.run_automations().created == 1
    (view,) = runs(coordinator, automation)
    assert view.run.status == "created" and view.task_status == "queued"
