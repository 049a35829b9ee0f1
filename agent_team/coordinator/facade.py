"""The coordinator: the one object requests go to, over the runner, the worker and the sweeper.

Requests (CLI, dashboard, transports, intake) go through the ledger first,
as `TaskRequests` writes them, then wake the worker: a task row and a `start`
command on submit, an answer and its `resume` command in one transaction,
a `cancel` command. The parts are built by `agent_team.service.wiring` from the
settings; the coordinator only holds them together and closes what it was
handed to close (docs/architecture.md §3, §4).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from agent_team import db
from agent_team.automations.runner import PassReport, runner_for
from agent_team.common.stops import SHUTDOWN
from agent_team.config import Settings
from agent_team.coordinator.loop_lease import LoopLease
from agent_team.coordinator.runner import GraphRunner, TaskObserver
from agent_team.coordinator.sweeper import CHECKPOINT_BATCH, Sweeper, SweepReport
from agent_team.coordinator.worker import Worker
from agent_team.models.budget_view import BudgetToday, settings_budget
from agent_team.nodes.common import GraphDeps
from agent_team.requests.actors import INTERNAL, Actor
from agent_team.requests.task_requests import TaskRequests
from agent_team.transports.base import Transport

__all__ = ["PRUNE_EVERY_S", "Coordinator", "TickReport"]

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 3600.0


@dataclass
class TickReport:
    commands: int = 0
    expired: int = 0
    unparked: int = 0
    checkpoints_pruned: int = 0
    automations: PassReport = field(default_factory=PassReport)
    sweep: SweepReport = field(default_factory=SweepReport)
    idle: bool = False


class Coordinator:
    """One per process: submit, answer, reopen, retry, cancel; the worker loop; the timers."""

    def __init__(
        self,
        settings: Settings,
        *,
        ledger: db.Ledger,
        checkpointer: BaseCheckpointSaver[Any],
        graph: CompiledStateGraph[Any, Any, Any, Any],
        deps: GraphDeps,
        transport: Transport,
        clock: Callable[[], datetime],
        resources: ExitStack | None = None,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.transport = transport
        self.clock = clock
        self.runner = GraphRunner(
            ledger=ledger,
            graph=graph,
            checkpointer=checkpointer,
            deps=deps,
            transport=transport,
            clock=clock,
            resume_pauses=settings.resume_pauses(),
        )
        self.worker = Worker(
            ledger,
            self.runner,
            workers=settings.workers,
            lease_s=settings.lease_s,
            task_timeout_s=settings.task_timeout.total_seconds(),
        )
        self.sweeper = Sweeper(
            ledger,
            self.runner,
            consumer=self.worker.consumer,
            clock=clock,
            checkpoint_retention=settings.checkpoint_retention,
        )
        self.requests = TaskRequests.of(
            ledger, settings, clock=clock, wake=self.worker.wake.set, deliver=self.deliver_open
        )
        self.automations = runner_for(
            ledger,
            settings,
            clock=clock,
            owner=self.worker.consumer,
            submit=self.start_task,
            crash_at=deps.crash_at,
        )
        self._resources = resources or ExitStack()
        self._loop_leases: dict[str, LoopLease] = {}
        self.wakeups = 0  # wake-ups from other instances' commands (`listen_for_commands`)

    # -- the parts, as the rest of the process reads them ---------------------------------

    @property
    def graph(self) -> CompiledStateGraph[Any, Any, Any, Any]:
        return self.runner.graph

    @property
    def deps(self) -> GraphDeps:
        return self.runner.deps

    @property
    def observers(self) -> list[TaskObserver]:
        return self.runner.observers

    @property
    def wake(self) -> threading.Event:
        return self.worker.wake

    @property
    def instance(self) -> str:
        """This process in leases, claims and `/healthz` (`host:pid:start-time`)."""
        return self.worker.consumer

    def loop_lease(self, loop: str, *, every_s: float) -> LoopLease:
        """The lease a loop run every `every_s` asks before each pass (one instance at a time);
        released when the coordinator closes, so a clean stop hands the loop over at once."""
        lease = self._loop_leases.get(loop)  # a restarted loop asks again
        if lease is None or lease.hold_s != every_s + self.settings.lease_s:
            lease = LoopLease(
                self.ledger,
                loop,
                owner=self.instance,
                every_s=every_s,
                lease_s=self.settings.lease_s,
            )
            self._loop_leases[loop] = lease
        return lease

    def loops_held(self) -> list[str]:
        """The singleton loops this instance runs now."""
        return sorted(name for name, lease in self._loop_leases.items() if lease.held)

    def close(self) -> None:
        """Finish the runs in the pool, then close what the wiring handed over (reverse order)."""
        self.worker.close()
        for lease in self._loop_leases.values():
            lease.release()
        self._resources.close()

    # -- requests (CLI, dashboard, transports, intake) ----------------------------------

    def start_task(self, **request: Any) -> str:
        """Submit a task through `requests` (which wakes the worker); returns its id."""
        task_id = self.requests.submit(**request)
        log.info("task %s submitted: %s", task_id, request.get("title"))
        return task_id

    def answer(self, question_id: str, text: str, *, via: str = "cli") -> db.Question:
        """Record an answer through `requests`; the worker wakes at once."""
        return self.requests.answer(question_id, text, via=via)

    def reopen(
        self, question_id: str, *, deadline: timedelta | None = None, actor: Actor = INTERNAL
    ) -> db.Question:
        """Reopen an expired question through `requests`; it is delivered again."""
        return self.requests.reopen(question_id, deadline=deadline, actor=actor)

    def retry(self, task_id: str, *, actor: Actor = INTERNAL) -> None:
        """Continue a parked or failed task from its last checkpoint through `requests`."""
        self.requests.retry(task_id, actor=actor)

    def cancel(self, task_id: str, *, actor: Actor = INTERNAL) -> None:
        """Queue a cancel through `requests`."""
        self.requests.cancel(task_id, actor=actor)

    def budget_today(self) -> BudgetToday:
        """Today's spend against the cap the model caller applies (automations, the inbox)."""
        return settings_budget(self.ledger, self.settings, self.clock())

    def counts(self) -> dict[str, int]:
        """Tasks per status, for systemd's STATUS= line and the health page."""
        return db.count_tasks_by_status(self.ledger)

    # -- running ------------------------------------------------------------------------

    def run_pending(self) -> int:
        """Claim up to `workers` runnable commands, run them, wait; returns how many ran."""
        return self.worker.run_pending()

    def deliver_open(self, task_id: str | None = None) -> int:
        """Deliver open questions that have no `channel_ref` yet (docs/architecture.md §3 step 2).

        A pass over every task (the timers') leaves out the tasks this instance is
        running: each such run delivers its own questions when it stops.
        """
        if task_id is not None:
            return self.runner.deliver_open(task_id)
        return self.runner.deliver_open(in_flight=lambda task: task in self.worker.running)

    def recovery_sweep(self) -> SweepReport:
        return self.sweeper.recovery_sweep()

    def check_deadlines(self) -> int:
        return self.sweeper.check_deadlines()

    def unpark_budget(self) -> int:
        return self.sweeper.unpark_budget()

    def unpark_models(self) -> int:
        return self.sweeper.unpark_models()

    def prune_events(self) -> int:
        return self.sweeper.prune_events()

    def run_automations(self) -> PassReport:
        """Finish runs a crash left claimed, then make the due automations' runs (the tasks
        they create wake the worker through `start_task`)."""
        return self.automations.run_pass()

    def prune_checkpoints(self) -> int:
        return self.sweeper.prune_checkpoints()

    def serve(
        self,
        stop: threading.Event,
        *,
        poll_s: float = 1.0,
        timers_s: float = 5.0,
        sweep: bool = True,
        beat: Callable[[], None] | None = None,
    ) -> None:
        """The worker loop a daemon runs until `stop` is set.

        In-process answers and finished runs set `wake`, so they are acted on
        at once; so do commands other instances queue, where the ledger can
        tell (`listen_for_commands`); otherwise (SQLite, or the listener
        reconnecting) they are found by polling the inbox every `poll_s`
        seconds. The timers run on one instance at a time, the holder of the
        `timers` loop lease: deadlines, budget unparking, the unparking of tasks
        whose models' pause is over and delivery retries every `timers_s`
        seconds; pruning every `PRUNE_EVERY_S`, or again after `timers_s`
        while a backlog of checkpoints fills whole passes. Once
        `stop` is set no new command is claimed; runs in flight go on
        (`wait_idle` waits).
        """
        if sweep:
            self.recovery_sweep()
        timers = self.loop_lease("timers", every_s=timers_s)
        next_timers = 0.0
        next_prune = 0.0
        next_checkpoints = 0.0
        while not stop.is_set():
            self.wake.clear()
            self.worker.fill()
            if time.monotonic() >= next_timers:
                next_timers = time.monotonic() + timers_s
                if timers.turn():
                    self.check_deadlines()
                    self.unpark_budget()
                    self.unpark_models()
                    self.deliver_open()
                    self.run_automations()
                    if time.monotonic() >= next_prune:
                        self.prune_events()
                        next_prune = time.monotonic() + PRUNE_EVERY_S
                    if time.monotonic() >= next_checkpoints:
                        backlog = self.prune_checkpoints() >= CHECKPOINT_BATCH
                        next_checkpoints = time.monotonic() + (
                            timers_s if backlog else PRUNE_EVERY_S
                        )
            if beat is not None:
                beat()
            self.wake.wait(poll_s)

    def listen_for_commands(
        self, stop: threading.Event, *, beat: Callable[[], None] | None = None
    ) -> None:
        """The daemon's `command-wakeups` loop: commands any instance queues wake this one's
        worker at once (PostgreSQL's LISTEN/NOTIFY; returns at once on SQLite)."""
        self.ledger.listen_for_commands(self._woken, stop, beat=beat)

    def _woken(self) -> None:
        self.wakeups += 1
        self.wake.set()

    def stop_waiting(self) -> None:
        """Wake the worker loop now, so a stop the daemon set is seen without waiting a poll."""
        self.wake.set()

    def running_tasks(self) -> list[str]:
        """The tasks whose runs go on in this process now."""
        return sorted(self.worker.running)

    def stop_runs(self) -> list[str]:
        """Stop every run in this process now (a daemon that will not wait for them); their
        tasks continue from their last checkpoint on the next start. Returns their ids."""
        return self.worker.stop_all(SHUTDOWN)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait for the runs `serve` started; False if some are still going after `timeout_s`."""
        return self.worker.wait_idle(timeout_s)

    def tick(self, *, until_idle: bool = False, timeout_s: float = 300.0) -> TickReport:
        """One pass (sweep, commands, deadlines, budget and model unparking); with `until_idle`,
        repeat until quiet."""
        report = TickReport(sweep=self.recovery_sweep())
        self.prune_events()
        report.checkpoints_pruned = self.prune_checkpoints()
        report.automations = self.run_automations()
        deadline = time.monotonic() + timeout_s
        while True:
            ran = self.run_pending()
            report.commands += ran
            expired = self.check_deadlines()
            unparked = self.unpark_budget() + self.unpark_models()
            report.expired += expired
            report.unparked += unparked
            if not until_idle or (ran == 0 and unparked == 0):
                report.idle = ran == 0 and unparked == 0
                return report
            if time.monotonic() > deadline:
                return report
