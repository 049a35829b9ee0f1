"""The coordinator: runs one checkpointed graph per task and carries out the gate protocol.

Everything that must survive a crash goes through the ledger first: a task
row and a `start` command on submit, an answer and its `resume` command in
one transaction, a `cancel` command. Workers claim commands with a lease and
run graphs in a bounded thread pool, never two runs of one task at once in
this process. After each run the coordinator reads the checkpoint: stopped
on an interrupt -> `waiting` and the question is delivered; finished -> a
terminal status. See DESIGN.md §3 and §4.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.errors import is_invalid_resume
from langgraph.types import Command as GraphCommand
from langgraph.types import StateSnapshot

from agent_team import db, inbox
from agent_team.builders.registry import make_builder, run_build
from agent_team.config import Settings
from agent_team.exceptions import (
    ParkingError,
    UnknownTaskError,
)
from agent_team.graph import NODE_PHASES, build_graph
from agent_team.integrations.confluence.lane import lane_from_settings
from agent_team.integrations.confluence.pages import result_note
from agent_team.models.caller import ModelCaller
from agent_team.models.registry import make_chat_model
from agent_team.nodes.common import GraphDeps
from agent_team.redact import redact, tail
from agent_team.reports import build_note
from agent_team.task_model import (
    TERMINAL_STATUSES,
    CommandKind,
    Phase,
    QuestionKind,
    QuestionStatus,
    TaskState,
    TaskStatus,
)
from agent_team.transports.base import Transport
from agent_team.transports.local import LocalTransport

__all__ = ["Coordinator", "SweepReport", "TaskObserver", "TickReport"]

log = logging.getLogger(__name__)

# Told of every task event after the transport: `started`, `waiting`, `parked`, `done`,
# `failed`, `cancelled`. Observers (the GitHub status comment, ...) must be idempotent:
# a crash can repeat an event, and they must never raise into the task.
TaskObserver = Callable[[db.Task, str, str], None]

# Slack retries an event for minutes and GitHub redelivers on request for days; a
# week of seen event ids covers both, and the table stays small.
EVENT_RETENTION = timedelta(days=7)
PRUNE_EVERY_S = 3600.0


@dataclass
class SweepReport:
    delivered: int = 0
    resumes_added: int = 0
    claims_released: int = 0
    tasks_continued: int = 0
    expired: int = 0


@dataclass
class TickReport:
    commands: int = 0
    expired: int = 0
    unparked: int = 0
    sweep: SweepReport = field(default_factory=SweepReport)
    idle: bool = False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Coordinator:
    """One per process: owns the graph, its checkpointer and the worker pool."""

    def __init__(
        self,
        settings: Settings,
        *,
        transport: Transport | None = None,
        clock: Callable[[], datetime] | None = None,
        publish: Callable[[TaskState], dict[str, Any] | None] | None = None,
    ) -> None:
        self.settings = settings
        self._publish = publish  # e.g. the GitHub draft PR; wired into the graph below
        self.transport: Transport = transport or LocalTransport()
        self.clock: Callable[[], datetime] = clock or settings.now
        self.db_path = settings.db_path
        db.init_db(self.db_path)
        db.assert_ready(self.db_path)
        self.ledger: db.Ledger = db.open_ledger(self.db_path)
        self.checkpointer = self.ledger.checkpointer()
        self.consumer = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.lease_s = max(settings.build_timeout_s + 300.0, 600.0)
        self.wake = threading.Event()
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._pool = ThreadPoolExecutor(
            max_workers=settings.workers, thread_name_prefix="agent-team-run"
        )
        self._in_flight: set[Future[None]] = set()
        self._in_flight_guard = threading.Lock()
        self.observers: list[TaskObserver] = []
        self.deps = self._make_deps()
        self.graph = build_graph(self.deps, self.checkpointer)

    # -- wiring -------------------------------------------------------------------------

    def _make_deps(self) -> GraphDeps:
        settings = self.settings
        caller = ModelCaller(
            ledger=self.ledger,
            chat=make_chat_model(settings.model),
            model=settings.model,
            billing_mode=settings.billing_mode,
            daily_budget_usd=settings.daily_budget_usd,
            daily_token_cap=settings.daily_token_cap,
            prices=settings.prices,
            outbox=settings.ledger_outbox,
            clock=self.clock,
        )
        builder = make_builder(
            settings.builder,
            build_command=settings.build_command,
            build_timeout_s=settings.build_timeout_s,
            claude_bin=settings.claude_bin,
            billing_mode=settings.billing_mode,
        )
        state_dir = settings.state_dir or self.db_path.parent / "state"
        return GraphDeps(
            ledger=self.ledger,
            caller=caller,
            build=partial(run_build, builder, repo_path=settings.repo_path, state_dir=state_dir),
            clock=self.clock,
            transport=self.transport.name,
            billing_mode=settings.billing_mode,
            max_clarify_rounds=settings.max_clarify_rounds,
            deadlines=self.default_deadlines(),
            crash_at=settings.crash_at,
            outbox=settings.ledger_outbox,
            confluence=lane_from_settings(settings),
            publish=self._publish,
        )

    def default_deadlines(self) -> dict[str, timedelta]:
        s = self.settings
        return {
            QuestionKind.CLARIFY.value: timedelta(hours=s.clarify_deadline_h),
            QuestionKind.PLAN_DECISION.value: timedelta(hours=s.plan_deadline_h),
            QuestionKind.CONFLUENCE_APPROVAL.value: timedelta(hours=s.confluence_deadline_h),
        }

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.deps.confluence is not None:
            self.deps.confluence.close()
        self.ledger.close()

    @staticmethod
    def _config(task_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": task_id}}

    @contextmanager
    def _task_lock(self, task_id: str) -> Iterator[None]:
        with self._locks_guard:
            lock = self._locks.setdefault(task_id, threading.Lock())
        with lock:
            yield

    # -- requests (CLI, dashboard, transports, intake) ----------------------------------

    def start_task(self, **request: Any) -> str:
        """Submit a task (see `inbox.submit_task`) and wake the worker."""
        request.setdefault("confluence_enabled", self.settings.confluence_enabled)
        task_id = inbox.submit_task(self.ledger, **request)
        log.info("task %s submitted: %s", task_id, request.get("title"))
        self.wake.set()
        return task_id

    def answer(self, question_id: str, text: str, *, via: str = "cli") -> db.Question:
        """Record an answer (see `gates.submit_answer`) and wake the worker at once."""
        answered = inbox.submit_answer(self.ledger, question_id, text, via=via, now=self.clock())
        self.wake.set()
        return answered

    def reopen(self, question_id: str, *, deadline: timedelta | None = None) -> db.Question:
        """Reopen an expired question (see `inbox.reopen`) and deliver it again."""
        question = db.get_question(self.ledger, question_id)
        if question is None:
            raise UnknownTaskError(f"no question {question_id!r}")
        window = {question.kind: deadline} if deadline else self.default_deadlines()
        reopened = inbox.reopen(
            self.ledger,
            question_id,
            deadline_at=inbox.deadline_for(question.kind, window, self.clock()),
        )
        self.deliver_open(reopened.thread_id)
        return reopened

    def retry(self, task_id: str) -> None:
        """Continue a parked task (see `inbox.retry_task`) and wake the worker."""
        inbox.retry_task(self.ledger, task_id)
        self.wake.set()

    def cancel(self, task_id: str) -> None:
        """Queue a cancel (see `inbox.cancel_task`) and wake the worker."""
        inbox.cancel_task(self.ledger, task_id)
        self.wake.set()

    # -- the worker ---------------------------------------------------------------------

    def _dispatch(self, slots: int) -> list[Future[None]]:
        if slots < 1:
            return []
        commands = db.claim_commands(
            self.ledger, consumer=self.consumer, limit=slots, lease_s=self.lease_s
        )
        # One job per task runs its commands in the order they were queued (a cancel
        # queued before a resume is handled first); different tasks run in parallel.
        by_task: dict[str, list[db.Command]] = {}
        for command in commands:
            by_task.setdefault(command.task_id, []).append(command)
        futures = [self._pool.submit(self._handle_in_order, batch) for batch in by_task.values()]
        for future in futures:
            future.add_done_callback(lambda _: self.wake.set())
        return futures

    def run_pending(self) -> int:
        """Claim up to `workers` runnable commands, run them, wait; returns how many ran."""
        futures = self._dispatch(self.settings.workers)
        for future in futures:
            future.result()
        return len(futures)

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
        at once; commands written by other processes (the CLI) are found by
        polling the inbox every `poll_s` seconds. Deadlines, budget unparking
        and delivery retries run every `timers_s` seconds. Once `stop` is set
        no new command is claimed; runs in flight go on (`wait_idle` waits).
        """
        if sweep:
            self.recovery_sweep()
        next_timers = 0.0
        next_prune = 0.0
        while not stop.is_set():
            self.wake.clear()
            with self._in_flight_guard:
                self._in_flight = {future for future in self._in_flight if not future.done()}
                free = self.settings.workers - len(self._in_flight)
            started = self._dispatch(free)
            with self._in_flight_guard:
                self._in_flight.update(started)
            if time.monotonic() >= next_timers:
                self.check_deadlines()
                self.unpark_budget()
                self.deliver_open()
                next_timers = time.monotonic() + timers_s
            if time.monotonic() >= next_prune:
                self.prune_events()
                next_prune = time.monotonic() + PRUNE_EVERY_S
            if beat is not None:
                beat()
            self.wake.wait(poll_s)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait for the runs `serve` started; False if some are still going after `timeout_s`."""
        with self._in_flight_guard:
            pending = list(self._in_flight)
        _done, not_done = wait(pending, timeout=timeout_s)
        return not not_done

    def counts(self) -> dict[str, int]:
        """Tasks per status, for systemd's STATUS= line and the health page."""
        return db.count_tasks_by_status(self.ledger)

    def _handle_in_order(self, commands: list[db.Command]) -> None:
        for command in commands:
            self._handle(command)

    def _handle(self, command: db.Command) -> None:
        try:
            with self._task_lock(command.task_id):
                if command.kind == CommandKind.CANCEL:
                    self._cancel_now(command.task_id)
                elif command.kind == CommandKind.RESUME:
                    self._resume(command)
                else:
                    self._start(command)
            db.complete_command(self.ledger, command_id=command.command_id, consumer=self.consumer)
        except Exception as exc:  # a bug or an unreachable ledger: keep the command for a retry
            log.exception("command %s failed", command.command_id)
            db.fail_command(
                self.ledger, command_id=command.command_id, error=redact(str(exc)),
                retry=command.attempts < 3, consumer=self.consumer,
            )  # fmt: skip

    def _start(self, command: db.Command) -> None:
        task = db.get_task(self.ledger, command.task_id)
        if task is None or task.status in TERMINAL_STATUSES:
            return
        snapshot = self.graph.get_state(self._config(task.id))
        if not snapshot.values:
            initial: TaskState = {
                "task_id": task.id,
                "kind": task.kind,
                "title": task.title,
                "body": task.body,
                "repo": command.payload.get("repo") or self._submitted_repo(task.id),
            }
            self._notify(task.id, "started", f"agent-team started on {task.title!r}")
            self._run(task.id, initial)
        else:
            self._continue(task.id, snapshot)

    def _submitted_repo(self, task_id: str) -> str | None:
        """The repository named at submit (recovery and unpark commands carry no payload)."""
        original = db.get_command(self.ledger, f"start:{task_id}")
        repo = original.payload.get("repo") if original is not None else None
        return str(repo) if repo else None

    def _lane_off(self, task_id: str, snapshot: StateSnapshot) -> bool:
        """Park a task whose next node is in the Confluence lane while the lane is off."""
        if self.deps.confluence is not None or snapshot.next or snapshot.interrupts:
            return False  # the graph knows what comes next: not stuck in a missing lane
        # A graph built without the lane cannot name its next node (`get_state().next` is
        # empty), so read the checkpoint's pending trigger channels (`branch:to:<node>`).
        saved = self.checkpointer.get_tuple(self._config(task_id))
        channels = saved.checkpoint.get("channel_values", {}) if saved is not None else {}
        if not any(channel.startswith("branch:to:conf_") for channel in channels):
            return False
        # Running it now would end short of `done` and park it as a lost checkpoint.
        self._park(
            task_id,
            "confluence_disabled",
            "the Confluence lane is off; set AGENT_TEAM_CONFLUENCE_ENABLED=true, then "
            f"agent-team retry {task_id}",
        )
        return True

    def _continue(self, task_id: str, snapshot: StateSnapshot) -> None:
        """Pick a graph up where its last checkpoint left it."""
        if self._lane_off(task_id, snapshot):
            return
        if snapshot.interrupts or snapshot.values.get("outcome") is not None:
            self._after_run(task_id)  # already waiting or finished: make sure it shows
        else:
            # A run cut short (crash). `next` can be empty here: when the step's only task
            # finished and saved its writes before the kill, LangGraph lists no next task
            # until those writes are applied, which invoke(None) does.
            self._run(task_id, None)

    def _resume(self, command: db.Command) -> None:
        question_id = str(command.payload.get("question_id"))
        task = db.get_task(self.ledger, command.task_id)
        if task is None or task.status in TERMINAL_STATUSES:
            db.supersede_question(self.ledger, question_id=question_id)
            return
        snapshot = self.graph.get_state(self._config(task.id))
        if self._lane_off(task.id, snapshot):
            return  # the answer stays stored; `agent-team retry` resumes with it
        waiting = [
            pending for pending in snapshot.interrupts
            if isinstance(pending.value, dict) and pending.value.get("question_id") == question_id
        ]  # fmt: skip
        if not waiting:
            question = db.get_question(self.ledger, question_id)
            applied = question is not None and snapshot.values.get("turn", 0) >= question.turn
            if not applied:
                # The graph moved on without it: LangGraph would silently ignore the value.
                log.info("task %s no longer waits on %s; superseding it", task.id, question_id)
                db.supersede_question(self.ledger, question_id=question_id)
            self._continue(task.id, snapshot)
            return
        answer = command.payload.get("answer")
        self._run(task.id, GraphCommand(resume={waiting[0].id: answer}))

    def _run(self, task_id: str, payload: TaskState | GraphCommand[Any] | None) -> None:
        # Every node marks the task running as it enters (nodes/common.enter).
        try:
            self.graph.invoke(payload, self._config(task_id), durability="sync")
        except ParkingError as exc:
            message = str(exc)
            if exc.parked_reason != "budget_exhausted":  # that one unparks itself tomorrow
                message += f"; then continue it: agent-team retry {task_id}"
            self._park(task_id, exc.parked_reason, message)
            return
        except Exception as exc:
            if is_invalid_resume(exc):
                # Refused before LangGraph saved it: the task still waits on its question.
                # Cannot happen for answers that came through inbox.submit_answer (same model).
                log.error("task %s refused a resume value: %s", task_id, redact(str(exc)))
                raise

            message = tail(redact(f"{type(exc).__name__}: {exc}"), 2000)
            log.warning("task %s failed: %s", task_id, message)
            self._finish(task_id, TaskStatus.FAILED, message)
            return
        self._after_run(task_id)

    def _after_run(self, task_id: str) -> None:
        snapshot = self.graph.get_state(self._config(task_id))
        if snapshot.interrupts:
            for pending in snapshot.interrupts:
                value = pending.value if isinstance(pending.value, dict) else {}
                asked = db.get_question(self.ledger, str(value.get("question_id")))
                if asked is not None and asked.status == QuestionStatus.ANSWERED:
                    # Answered before a crash cost the graph its checkpoint: the graph never
                    # consumed the answer, so give it now (once: the next stop is a new turn).
                    self._run(task_id, GraphCommand(resume={pending.id: asked.answer}))
                    return
            phase = NODE_PHASES.get(snapshot.next[0], Phase.INTAKE) if snapshot.next else None
            if phase is not None:
                db.enter_phase(self.ledger, task_id=task_id, phase=phase, status=TaskStatus.WAITING)
            else:
                db.set_task_status(self.ledger, task_id, TaskStatus.WAITING)
            self.deliver_open(task_id)
            kinds = sorted(
                {str(p.value.get("kind")) for p in snapshot.interrupts if isinstance(p.value, dict)}
            )
            self._notify(task_id, "waiting", f"waiting on a person: {', '.join(kinds)}")
        elif not snapshot.next:
            outcome = snapshot.values.get("outcome")
            if outcome is None:
                # The graph says it ended but its `done` node never ran: a checkpoint was
                # lost (seen after kill -9). Never report that as success.
                self._park(
                    task_id,
                    "needs_operator",
                    "the task's checkpoints end before `done`; inspect it and resubmit",
                )
                return
            status = TaskStatus.CANCELLED if outcome == "cancelled" else TaskStatus.DONE
            build = snapshot.values.get("build") or {}
            note = build_note(build["branch"], build["commit"]) if build else None
            pull = snapshot.values.get("pull_request") or {}
            docs = result_note(snapshot.values.get("confluence"))  # the Confluence lane's
            told = [note, f"pull request {pull['url']}" if pull.get("url") else None, docs]
            text = "; ".join(part for part in told if part) or None
            # The transition note keeps the build note first (the dashboard parses it).
            self._finish(task_id, status, note or docs, text=text)

    def _park(self, task_id: str, reason: str, message: str) -> None:
        task = db.get_task(self.ledger, task_id)
        db.set_task_status(self.ledger, task_id, TaskStatus.PARKED, parked_reason=reason)
        if task is not None:
            db.record_transition(
                self.ledger, thread_id=task_id, to_phase=task.phase, status=TaskStatus.PARKED,
                note=redact(message),
            )  # fmt: skip
            self._notify(task_id, "parked", redact(message))

    def _finish(
        self, task_id: str, status: TaskStatus, note: str | None, *, text: str | None = None
    ) -> None:
        phase = Phase.DONE if status != TaskStatus.FAILED else None
        db.set_task_status(self.ledger, task_id, status, phase=phase)
        db.close_terminal(self.ledger, thread_id=task_id, status=status, note=note)
        for question in db.list_questions(self.ledger, thread_id=task_id):
            if question.status in (QuestionStatus.OPEN, QuestionStatus.EXPIRED):
                db.supersede_question(self.ledger, question_id=question.question_id)
        self._notify(task_id, status.value, text or note or status.value)

    def _cancel_now(self, task_id: str) -> None:
        task = db.get_task(self.ledger, task_id)
        if task is None or task.status in TERMINAL_STATUSES:
            return
        self._finish(task_id, TaskStatus.CANCELLED, "cancelled by an operator")

    def _notify(self, task_id: str, event: str, text: str) -> None:
        task = db.get_task(self.ledger, task_id)
        if task is None:
            return
        for tell in (self.transport.notify, *self.observers):
            try:
                tell(task, event, text)
            except Exception:  # a notification must never fail the task
                log.exception("could not notify task %s (%s)", task_id, event)

    def deliver_open(self, task_id: str | None = None) -> int:
        """Deliver open questions that have no `channel_ref` yet (DESIGN.md §3 step 2)."""
        delivered = 0
        for question in db.list_questions(self.ledger, status="open", thread_id=task_id):
            if question.channel_ref is not None:
                continue
            task = db.get_task(self.ledger, question.thread_id)
            if task is None:
                continue
            try:
                ref = self.transport.deliver(question, task)
            except Exception:
                log.exception("delivering %s failed; the sweep retries", question.question_id)
                continue
            if db.record_delivery(
                self.ledger,
                question_id=question.question_id,
                channel_ref=ref,
                posted_at=self.clock(),
            ):
                delivered += 1
        return delivered

    # -- timers and recovery ------------------------------------------------------------

    def check_deadlines(self) -> int:
        """Expire overdue questions and park their tasks. Never defaults an approval to yes."""
        expired = 0
        for question in db.overdue_questions(self.ledger, self.clock()):
            if not db.expire_question(self.ledger, question_id=question.question_id):
                continue  # answered in the meantime: the answer won
            expired += 1
            self._park(
                question.thread_id,
                "question_expired",
                f"question {question.question_id} expired at {question.deadline_at}; "
                f"reopen it with `agent-team reopen {question.question_id}`",
            )
        return expired

    def prune_events(self) -> int:
        """Forget inbound event ids (Slack, GitHub deliveries) older than `EVENT_RETENTION`."""
        removed = db.prune_events(self.ledger, older_than=self.clock() - EVENT_RETENTION)
        if removed:
            log.info("forgot %d event id(s) older than %s", removed, EVENT_RETENTION)
        return removed

    def _all_tasks(self, status: TaskStatus) -> list[db.Task]:
        found: list[db.Task] = []
        while True:
            page = db.list_tasks(self.ledger, status=status.value, limit=500, offset=len(found))
            found.extend(page)
            if len(page) < 500:
                return found

    def unpark_budget(self) -> int:
        """Tasks parked on today's budget continue once the UTC day has turned."""
        today = db.day_bucket(self.clock())
        resumed = 0
        for task in db.parked_before(self.ledger, reason="budget_exhausted", day=today):
            db.set_task_status(self.ledger, task.id, TaskStatus.QUEUED, phase=task.phase)
            db.enqueue_command(
                self.ledger, command_id=f"unpark:{task.id}:{today}:{uuid.uuid4().hex[:6]}",
                kind=CommandKind.START.value,
                task_id=task.id, payload={},
            )  # fmt: skip
            resumed += 1
        return resumed

    def recovery_sweep(self) -> SweepReport:
        """Put every half-finished thing back on its way after a crash (DESIGN.md §4)."""
        report = SweepReport()
        host = socket.gethostname()
        for command in db.list_commands(self.ledger, state="claimed"):
            owner = (command.claimed_by or "").split(":")
            if len(owner) == 3 and owner[0] == host and owner[1].isdigit():
                pid = int(owner[1])
                if (pid == os.getpid() and command.claimed_by != self.consumer) or (
                    pid != os.getpid() and not _pid_alive(pid)
                ):
                    if db.release_command(
                        self.ledger,
                        command_id=command.command_id,
                        consumer=command.claimed_by or "",
                    ):
                        report.claims_released += 1
        for question in db.answered_without_resume(self.ledger):
            report.resumes_added += int(
                db.enqueue_command(
                    self.ledger, command_id=db.resume_command_id(question.question_id),
                    kind=CommandKind.RESUME.value, task_id=question.thread_id,
                    payload={"question_id": question.question_id, "answer": question.answer},
                )
            )  # fmt: skip
        busy = {
            c.task_id
            for c in db.list_commands(self.ledger, state="pending")
            + db.list_commands(self.ledger, state="claimed")
        }
        for status in (TaskStatus.RUNNING, TaskStatus.QUEUED):
            for task in self._all_tasks(status):
                if task.id in busy:
                    continue
                db.enqueue_command(
                    self.ledger, command_id=f"recover:{task.id}:{uuid.uuid4().hex[:8]}",
                    kind=CommandKind.START.value, task_id=task.id, payload={},
                )  # fmt: skip
                report.tasks_continued += 1
        report.delivered = self.deliver_open()
        report.expired = self.check_deadlines()
        return report

    def tick(self, *, until_idle: bool = False, timeout_s: float = 300.0) -> TickReport:
        """One pass (sweep, commands, deadlines, budget); with `until_idle`, repeat until quiet."""
        report = TickReport(sweep=self.recovery_sweep())
        self.prune_events()
        deadline = time.monotonic() + timeout_s
        while True:
            ran = self.run_pending()
            report.commands += ran
            expired = self.check_deadlines()
            unparked = self.unpark_budget()
            report.expired += expired
            report.unparked += unparked
            if not until_idle or (ran == 0 and unparked == 0):
                report.idle = ran == 0 and unparked == 0
                return report
            if time.monotonic() > deadline:
                return report
