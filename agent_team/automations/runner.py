"""Making an automation's runs: claim the slot, check the budget, create the task.

Each pass first finishes runs claimed but left without an outcome (a process
killed between the claim and the task), then claims every due automation's
latest slot through the claim gate (`db.claim_slot`) and finishes it:

1. the claim (one transaction): the schedule moves on, the run row is written,
   and with overlap `skip` a run whose previous task is still open is recorded
   `skipped_overlap` there and then;
2. the budget gate: today's spend against the cap the model caller applies;
   at or over it the run is `skipped_budget` (not a failure: no retry, the next
   slot tries again, and the inbox shows it);
3. the task, submitted with an id derived from the run, so finishing the same
   run twice creates it once; then the run is `created` (or `failed`, with the
   reason, if the submission was refused).

Whatever the outcome, its audit row is written with it (`db.claim_slot`,
`db.finish_run`). `run-now` takes the same steps on a slot of its own (the
moment it was asked), its overlap policy included.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from agent_team import db
from agent_team.automations.schedule import Schedule
from agent_team.common.redact import redact
from agent_team.common.testhooks import crash_if
from agent_team.exceptions import LedgerError, LedgerInputError, TaskRefusedError
from agent_team.models.budget_view import BudgetToday, settings_budget
from agent_team.requests.actors import Actor
from agent_team.requests.task_requests import TaskRequests
from agent_team.task_model import (
    AutomationRunStatus,
    AutomationStatus,
    OverlapPolicy,
    ScheduleKind,
)

if TYPE_CHECKING:
    from agent_team.config import Settings

__all__ = [
    "SWEEP_AFTER",
    "AutomationRunner",
    "PassReport",
    "run_id_for",
    "runner_for",
    "schedule_of",
    "task_id_for",
]

log = logging.getLogger(__name__)

Submit = Callable[..., str]  # TaskRequests.submit of the process (the coordinator's)
# How long a claimed run is its claimer's to finish before a pass takes it for a crash's.
SWEEP_AFTER = timedelta(minutes=1)


def run_id_for(automation_id: str, slot_at: str) -> str:
    return f"{automation_id}@{slot_at}"


def task_id_for(run_id: str) -> str:
    """The run's task id: the same for every attempt to finish the run."""
    return "t" + hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:10]


def schedule_of(automation: db.Automation) -> Schedule:
    every = automation.every_s
    return Schedule(
        ScheduleKind(automation.schedule_kind),
        db.from_iso(automation.first_run_at),
        every=timedelta(seconds=every) if every else None,
        cron=automation.cron,
        timezone=automation.timezone,
    )


@dataclass
class PassReport:
    created: int = 0
    skipped_budget: int = 0
    skipped_overlap: int = 0
    failed: int = 0
    finished_after_crash: int = 0

    def count(self, status: str) -> None:
        if status == AutomationRunStatus.CREATED:
            self.created += 1
        elif status == AutomationRunStatus.SKIPPED_BUDGET:
            self.skipped_budget += 1
        elif status == AutomationRunStatus.SKIPPED_OVERLAP:
            self.skipped_overlap += 1
        elif status == AutomationRunStatus.FAILED:
            self.failed += 1


class AutomationRunner:
    """One process's maker of automation runs (the daemon's `automations` loop, `tick`)."""

    def __init__(
        self,
        ledger: db.Ledger,
        *,
        submit: Submit,
        budget: Callable[[], BudgetToday],
        clock: Callable[[], datetime],
        owner: str,
        crash_at: str | None = None,
        sweep_after: timedelta = SWEEP_AFTER,
    ) -> None:
        self.ledger = ledger
        self.submit = submit
        self.budget = budget
        self.clock = clock
        self.owner = owner
        self.crash_at = crash_at
        self.sweep_after = sweep_after

    def run_pass(self) -> PassReport:
        """Finish what a crash left claimed, then claim and finish every due slot.

        A run is left to its claimer for `sweep_after` (another process may be
        finishing it now); past that it was left by a crash and is finished here.
        A database that goes away ends the pass: the runs stay claimed and the
        next pass finishes them.
        """
        report = PassReport()
        now = self.clock()
        try:
            for left in db.claimed_runs(self.ledger, claimed_before=now - self.sweep_after):
                outcome = self.finish(left)
                if outcome is not None:  # None: another process finished it meanwhile
                    report.count(outcome)
                    report.finished_after_crash += 1
            for automation in db.due_automations(self.ledger, now):
                run = self.claim_due(automation, now)
                if run is None:
                    continue
                claimed = run.status == AutomationRunStatus.CLAIMED
                outcome = self.finish(run) if claimed else run.status
                if outcome is not None:
                    report.count(outcome)
        except LedgerError as exc:
            if not db.is_outage(exc):
                raise
            log.warning("automations: the ledger is away (%s); the next pass goes on", exc)
        return report

    def claim_due(self, automation: db.Automation, now: datetime) -> db.AutomationRun | None:
        """Claim the latest slot of `automation` that has come; None if another claimer won."""
        if automation.next_run_at is None:
            return None
        due = schedule_of(automation).due(db.from_iso(automation.next_run_at), now)
        if due is None:
            return None
        slot = db.to_iso(due.slot)
        run_id = run_id_for(automation.automation_id, slot)
        run = db.claim_slot(
            self.ledger,
            automation_id=automation.automation_id,
            expected_next=automation.next_run_at,
            slot_at=slot,
            next_run_at=db.to_iso(due.following) if due.following else None,
            missed=due.missed,
            run_id=run_id,
            task_id=task_id_for(run_id),
            claimed_by=self.owner,
            claimed_at=now,
            skip_if_open=automation.overlap == OverlapPolicy.SKIP,
        )
        if run is not None:
            log.info(
                "automation %s: slot %s claimed (%s%s)",
                automation.name,
                slot,
                run.status,
                f", {due.missed} missed" if due.missed else "",
            )
        return run

    def run_now(self, automation: db.Automation, *, audit: db.AuditEntry) -> db.AutomationRun:
        """A run outside the schedule (`run-now`): its own slot, the overlap policy (with `skip`
        it is recorded `skipped_overlap` while the previous run's task is open), the budget gate.

        Raises:
            LedgerInputError: another run-now took the same microsecond.
        """
        moment = self.clock()
        slot = db.to_iso(moment)
        run_id = run_id_for(automation.automation_id, slot)
        run = db.claim_slot(
            self.ledger,
            automation_id=automation.automation_id,
            expected_next=None,
            slot_at=slot,
            next_run_at=None,
            missed=0,
            run_id=run_id,
            task_id=task_id_for(run_id),
            claimed_by=self.owner,
            claimed_at=moment,
            manual=True,
            skip_if_open=automation.overlap == OverlapPolicy.SKIP,
            audit=audit,
        )
        if run is None:
            raise LedgerInputError(f"automation {automation.name} was just run; try again")
        if run.status == AutomationRunStatus.CLAIMED:
            self.finish(run)
        finished = db.get_run(self.ledger, run.run_id)
        assert finished is not None  # written above
        return finished

    def finish(self, run: db.AutomationRun) -> str | None:
        """Take a claimed run to its outcome (idempotent); the outcome, or None if another
        process finished the run first (its task, if any, is the same one)."""
        crash_if(self.crash_at, "automation:claimed")
        automation = db.get_automation(self.ledger, run.automation_id)
        if db.get_task(self.ledger, run.task_id) is not None:
            status, detail = AutomationRunStatus.CREATED.value, None  # made before a crash
        elif automation is None:
            status, detail = AutomationRunStatus.FAILED.value, "the automation is gone"
        elif automation.status != AutomationStatus.ACTIVE and not run.manual:
            # Paused or cancelled after the claim (a crash left it): the operator's word wins.
            status, detail = (
                AutomationRunStatus.FAILED.value,
                f"the automation is {automation.status}",
            )
        else:
            status, detail = self._create(run, automation)
        if not db.finish_run(self.ledger, run_id=run.run_id, status=status, detail=detail):
            return None
        return status

    def _create(self, run: db.AutomationRun, automation: db.Automation) -> tuple[str, str | None]:
        budget = self.budget()
        if budget.reached:
            log.info("automation %s: run skipped, budget reached", automation.name)
            return (
                AutomationRunStatus.SKIPPED_BUDGET.value,
                f"daily cap reached: {budget.describe()}",
            )
        missed = f" ({run.missed} earlier slot(s) missed while nothing ran)" if run.missed else ""
        try:
            self.submit(
                task_id=run.task_id,
                title=automation.title,
                body=automation.body,
                kind=automation.kind,
                repo=automation.repo,
                source="automation",
                source_ref=f"{automation.automation_id}@{run.slot_at}",
                actor=Actor(automation.name, "automation"),
            )
        except (TaskRefusedError, LedgerInputError) as exc:  # the task itself was refused
            log.warning("automation %s: run failed: %s", automation.name, redact(str(exc)))
            return AutomationRunStatus.FAILED.value, redact(str(exc))
        crash_if(self.crash_at, "automation:task-created")
        return AutomationRunStatus.CREATED.value, f"task {run.task_id}{missed}"


def runner_for(
    ledger: db.Ledger,
    settings: Settings,
    *,
    clock: Callable[[], datetime],
    owner: str,
    submit: Submit | None = None,
    crash_at: str | None = None,
) -> AutomationRunner:
    """A runner with the configured budget gate; tasks go straight to the ledger's inbox
    unless `submit` says otherwise (the coordinator's, which also wakes its worker)."""
    return AutomationRunner(
        ledger,
        submit=submit or TaskRequests.of(ledger, settings, clock=clock).submit,
        budget=lambda: settings_budget(ledger, settings, clock()),
        clock=clock,
        owner=owner,
        crash_at=crash_at,
    )
