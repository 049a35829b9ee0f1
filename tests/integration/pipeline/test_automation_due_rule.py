"""The due rule (issue #32): when a new or changed automation is first due, over real minute
slots on the coordinator's clock; `run-now` under the overlap policy; every run's outcome in
the audit chain; the inbox seeing what is due and not run.

A new `--every` automation is due at once (its grid starts when it is made), a first run
that has passed is due at once (one run, counting the slots missed since), and a cron
line without a first run is due at its first slot from now: a cron line names its times.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_team import db
from agent_team.automations import service
from agent_team.coordinator import Coordinator
from agent_team.reports import triage
from agent_team.requests.actors import Actor
from tests.integration.ledger.test_races import race
from tests.integration.pipeline.conftest import LONG_BODY, Clock, MakeCoordinator

T0 = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)  # a Monday, on the minute
ADA = Actor("ada", "cli")


def add(coordinator: Coordinator, clock: Clock, **request: Any) -> db.Automation:
    fields: dict[str, Any] = {"name": "bumps", "title": "Review dependency bumps"}
    fields.update(body=LONG_BODY, **request)
    return service.create(
        coordinator.ledger, service.AutomationRequest(**fields), actor=ADA, now=clock.now
    )


def runs(coordinator: Coordinator, automation: db.Automation) -> list[db.AutomationRun]:
    """Oldest first."""
    views = db.list_runs(coordinator.ledger, automation.automation_id, limit=100)
    return [view.run for view in reversed(views)]


def next_run(coordinator: Coordinator, name: str) -> str | None:
    found = db.get_automation(coordinator.ledger, name)
    assert found is not None
    return found.next_run_at


def outcomes(coordinator: Coordinator) -> list[tuple[str, str, dict[str, Any]]]:
    """The runs' outcome rows in the audit log, oldest first: (action, actor, detail)."""
    rows = db.list_audit(coordinator.ledger, action="automation.run.", limit=1000)
    return [(row.action, row.actor, row.detail_dict) for row in reversed(rows)]


def chain_holds(coordinator: Coordinator) -> bool:
    with coordinator.ledger.snapshot() as view:
        return db.verify_audit(view).ok


def test_a_first_run_in_the_past_is_due_at_once_one_run_counting_the_missed_minutes(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0 + timedelta(minutes=10, seconds=30))
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock, every="1m", first_run_at=T0.isoformat())
    assert automation.next_run_at == db.to_iso(T0), "due at once, not at the next minute"
    assert [a.name for a in db.due_automations(coordinator.ledger, clock.now)] == ["bumps"]

    assert coordinator.run_automations().created == 1
    assert coordinator.run_automations().created == 0, "one run for the minutes missed"
    (run,) = runs(coordinator, automation)
    assert (run.slot_at, run.missed) == (db.to_iso(T0 + timedelta(minutes=10)), 10)
    assert "10 earlier slot(s) missed" in (run.detail or "")
    # Later slots stay on the grid of the first run.
    assert next_run(coordinator, "bumps") == db.to_iso(T0 + timedelta(minutes=11))
    clock.now = T0 + timedelta(minutes=11)
    assert coordinator.run_automations().skipped_overlap == 1, "the first task is still open"
    assert [(r.slot_at, r.missed) for r in runs(coordinator, automation)][1] == (
        db.to_iso(T0 + timedelta(minutes=11)),
        0,
    )


def test_a_one_off_in_the_past_runs_once_at_once(make_coordinator: MakeCoordinator) -> None:
    clock = Clock(T0 + timedelta(hours=1))
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock, once=True, first_run_at=T0.isoformat())
    assert (automation.status, automation.next_run_at) == ("active", db.to_iso(T0))

    assert coordinator.run_automations().created == 1
    (run,) = runs(coordinator, automation)
    assert (run.slot_at, run.missed, run.status) == (db.to_iso(T0), 0, "created")
    assert next_run(coordinator, "bumps") is None, "it has had its one slot"
    clock.now += timedelta(days=1)
    assert coordinator.run_automations().created == 0
    assert len(runs(coordinator, automation)) == 1


def test_the_inbox_shows_a_one_off_whose_time_has_passed_and_that_nobody_ran(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0 + timedelta(hours=1))
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock, once=True, first_run_at=T0.isoformat())

    def overdue() -> list[triage.TriageItem]:
        with coordinator.ledger.snapshot() as view:
            items = triage.triage(view, now=clock.now, budget=None)
        return [item for item in items if item.automation_id == automation.automation_id]

    (item,) = overdue()
    assert (item.kind, item.title, item.since) == ("automation", "bumps", db.to_iso(T0))
    assert item.detail.startswith("overdue")
    coordinator.run_automations()
    assert overdue() == [], "run: no longer overdue"


def test_a_new_interval_automation_is_due_at_once_and_its_grid_starts_then(
    make_coordinator: MakeCoordinator,
) -> None:
    made_at = T0 + timedelta(seconds=13)
    clock = Clock(made_at)
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock, every="1m", overlap="allow")
    assert automation.next_run_at == automation.first_run_at == db.to_iso(made_at)

    assert coordinator.run_automations().created == 1
    clock.now = made_at + timedelta(seconds=59)
    assert coordinator.run_automations().created == 0, "the next slot is a minute on"
    clock.now = made_at + timedelta(minutes=1)
    assert coordinator.run_automations().created == 1
    clock.now = made_at + timedelta(minutes=4, seconds=30)
    assert coordinator.run_automations().created == 1
    slots = [(r.slot_at, r.missed) for r in runs(coordinator, automation)]
    assert slots == [
        (db.to_iso(made_at), 0),
        (db.to_iso(made_at + timedelta(minutes=1)), 0),
        (db.to_iso(made_at + timedelta(minutes=4)), 2),
    ]


def test_a_cron_line_waits_for_its_first_slot_unless_its_first_run_has_passed(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0 + timedelta(minutes=2))
    coordinator = make_coordinator(clock=clock)
    waits = add(coordinator, clock, name="waits", cron="*/5 * * * *")
    assert waits.next_run_at == db.to_iso(T0 + timedelta(minutes=5)), "a cron line names its times"
    late = add(
        coordinator,
        clock,
        name="late",
        cron="*/5 * * * *",
        first_run_at=(T0 - timedelta(minutes=30)).isoformat(),
    )
    assert late.next_run_at == db.to_iso(T0 - timedelta(minutes=30)), "due at once"

    assert coordinator.run_automations().created == 1
    (caught_up,) = runs(coordinator, late)
    assert (caught_up.slot_at, caught_up.missed) == (db.to_iso(T0), 6)
    assert runs(coordinator, waits) == []
    clock.now = T0 + timedelta(minutes=5)
    coordinator.run_automations()
    assert [r.slot_at for r in runs(coordinator, waits)] == [db.to_iso(T0 + timedelta(minutes=5))]


def test_a_change_that_names_a_past_first_run_is_due_at_once_but_never_repeats_a_slot(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0)
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock, every="1h", first_run_at=T0.isoformat(), overlap="allow")
    assert coordinator.run_automations().created == 1  # the 08:00 slot
    clock.now = T0 + timedelta(minutes=30)

    def change(**request: Any) -> db.Automation:
        return service.update(
            coordinator.ledger,
            "bumps",
            service.AutomationRequest(**request),
            actor=ADA,
            now=clock.now,
        )

    assert change(every="2h").next_run_at == db.to_iso(T0 + timedelta(minutes=30, hours=2)), (
        "without a first run a change starts from now"
    )
    again = change(every="1h", first_run_at=T0.isoformat())
    assert again.next_run_at == db.to_iso(T0 + timedelta(hours=1)), "08:00 has had its run"
    moved = change(every="1h", first_run_at=(T0 + timedelta(minutes=10)).isoformat())
    assert moved.next_run_at == db.to_iso(T0 + timedelta(minutes=10)), "due at once"
    assert coordinator.run_automations().created == 1
    assert [r.slot_at for r in runs(coordinator, automation)] == [
        db.to_iso(T0),
        db.to_iso(T0 + timedelta(minutes=10)),
    ]


def test_a_one_off_resumed_after_its_time_still_makes_its_run(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0)
    coordinator = make_coordinator(clock=clock)
    once_at = T0 + timedelta(minutes=10)
    automation = add(coordinator, clock, once=True, first_run_at=once_at.isoformat())
    service.change_status(coordinator.ledger, "bumps", "pause", actor=ADA, now=clock.now)
    clock.now = T0 + timedelta(minutes=20)
    assert coordinator.run_automations().created == 0, "paused"
    resumed = service.change_status(coordinator.ledger, "bumps", "resume", actor=ADA, now=clock.now)
    assert resumed.next_run_at == db.to_iso(once_at)
    assert coordinator.run_automations().created == 1
    assert [r.slot_at for r in runs(coordinator, automation)] == [db.to_iso(once_at)]


def test_two_run_nows_with_skip_make_one_task_and_one_skipped_overlap(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0)
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock, cron="0 9 * * MON")  # not due: only run-now runs
    first = service.run_now(coordinator.ledger, "bumps", runner=coordinator.automations, actor=ADA)
    clock.now += timedelta(minutes=1)
    second = service.run_now(coordinator.ledger, "bumps", runner=coordinator.automations, actor=ADA)

    assert (first.status, second.status) == ("created", "skipped_overlap")
    assert f"task {first.task_id} is still open" in (second.detail or "")
    assert [t.id for t in db.list_tasks(coordinator.ledger)] == [first.task_id]
    assert [r.run_id for r in runs(coordinator, automation)] == [first.run_id, second.run_id]
    assert [(action, actor) for action, actor, _ in outcomes(coordinator)] == [
        ("automation.run.created", "bumps"),
        ("automation.run.skipped_overlap", "bumps"),
    ]
    assert chain_holds(coordinator)


class TickingClock(Clock):
    """Each reading a microsecond after the last, from any thread: racers' run-nows get
    slots of their own (two run-nows in one microsecond are refused, not raced)."""

    def __init__(self, now: datetime) -> None:
        super().__init__(now)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self.now += timedelta(microseconds=1)
            return self.now


def test_racing_run_nows_with_skip_make_one_task(make_coordinator: MakeCoordinator) -> None:
    clock = TickingClock(T0)
    coordinator = make_coordinator(clock=clock)
    automation = add(coordinator, clock, cron="0 9 * * MON")

    made = race(
        4,
        lambda n: service.run_now(
            coordinator.ledger, "bumps", runner=coordinator.automations, actor=Actor(f"p{n}", "cli")
        ),
    )

    assert sorted(run.status for run in made) == ["created"] + ["skipped_overlap"] * 3
    (created,) = [run for run in made if run.status == "created"]
    assert [t.id for t in db.list_tasks(coordinator.ledger)] == [created.task_id]
    assert len(runs(coordinator, automation)) == 4
    assert sorted(action for action, _, _ in outcomes(coordinator)) == [
        "automation.run.created",
        *["automation.run.skipped_overlap"] * 3,
    ]
    assert chain_holds(coordinator)


def test_every_outcome_of_a_scheduled_run_is_in_the_audit_chain(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock(T0 - timedelta(minutes=5))
    coordinator = make_coordinator(clock=clock, daily_token_cap=1000)
    add(coordinator, clock, every="1h", first_run_at=T0.isoformat())
    clock.now = T0 + timedelta(seconds=1)
    assert coordinator.run_automations().created == 1
    clock.now = T0 + timedelta(hours=1, seconds=1)
    assert coordinator.run_automations().skipped_overlap == 1
    (task,) = db.list_tasks(coordinator.ledger)
    coordinator.cancel(task.id)
    coordinator.tick(until_idle=True, timeout_s=60)
    assert db.record_usage(  # the day's token cap is reached
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
    clock.now = T0 + timedelta(hours=2, seconds=1)
    assert coordinator.run_automations().skipped_budget == 1
    clock.now = T0 + timedelta(hours=3, seconds=1)
    moved = db.get_automation(coordinator.ledger, "bumps")
    assert moved is not None
    claimed = coordinator.automations.claim_due(moved, clock.now)  # ... and the process dies
    assert claimed is not None
    service.change_status(coordinator.ledger, "bumps", "cancel", actor=ADA, now=clock.now)
    clock.now += timedelta(minutes=5)
    assert coordinator.run_automations().failed == 1

    found = outcomes(coordinator)
    assert [(action, actor) for action, actor, _ in found] == [
        ("automation.run.created", "bumps"),
        ("automation.run.skipped_overlap", "bumps"),
        ("automation.run.skipped_budget", "bumps"),
        ("automation.run.failed", "bumps"),
    ]
    details = [detail for _, _, detail in found]
    assert details[0]["task"] == task.id and details[0]["slot"] == db.to_iso(T0)
    assert f"{task.id} is still open" in details[1]["reason"]
    assert "1,000 of 1,000 tokens" in details[2]["reason"]
    assert details[3]["reason"] == "the automation is cancelled"
    assert chain_holds(coordinator)
