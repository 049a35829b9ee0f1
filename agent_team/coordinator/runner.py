"""The graph runner: runs one task's checkpointed graph a step further and records what it did.

A run starts a task, resumes it with an answer, or continues it from its
last checkpoint after a crash. After each run the runner looks where the
graph stopped (in what `invoke` returned; in the checkpoint when that is not
enough): on an interrupt -> `waiting` and the question is delivered;
finished -> a terminal status. Everything that must survive a
crash is in the ledger first (docs/architecture.md §3, §4); the runner never claims
commands itself (that is the worker's job) and is safe to call from the
worker's threads, one run per task at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import is_invalid_resume
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command as GraphCommand
from langgraph.types import Interrupt, StateSnapshot

from agent_team import db
from agent_team.common.redact import redact, tail
from agent_team.common.stops import SHUTDOWN
from agent_team.exceptions import FencedError, ModelsDownError, ParkingError, TaskStoppedError
from agent_team.graph import NODE_PHASES, QUESTION_PHASES
from agent_team.nodes.common import GraphDeps
from agent_team.reports import task as reports
from agent_team.task_model import (
    TERMINAL_STATUSES,
    Phase,
    QuestionStatus,
    TaskState,
    TaskStatus,
)
from agent_team.transports.base import Transport

__all__ = ["GraphRunner", "TaskObserver", "thread_config"]

log = logging.getLogger(__name__)

# Told of every task event after the transport: `started`, `waiting`, `parked`, `done`,
# `failed`, `cancelled`. Observers (the GitHub status comment, ...) must be idempotent:
# a crash can repeat an event, and they must never raise into the task.
TaskObserver = Callable[[db.Task, str, str], None]


# Parked on every model of a call: continues by itself after a pause (`Sweeper.unpark_models`).
_MODEL_UNAVAILABLE = ModelsDownError.parked_reason


def thread_config(task_id: str) -> RunnableConfig:
    """The LangGraph config of a task's thread (thread id = task id)."""
    return {"configurable": {"thread_id": task_id}}


@dataclass(frozen=True)
class _Stop:
    """Where a run left the graph: what `_after_run` needs of a `StateSnapshot`."""

    interrupts: Sequence[Interrupt]
    values: Mapping[str, Any]
    # The phase of the node that waits (None: the graph names no next node).
    waiting_in: Phase | None
    ended: bool

    @classmethod
    def of_snapshot(cls, snapshot: StateSnapshot) -> _Stop:
        phase = NODE_PHASES.get(snapshot.next[0], Phase.INTAKE) if snapshot.next else None
        return cls(snapshot.interrupts, snapshot.values, phase, not snapshot.next)

    @classmethod
    def of_output(cls, output: Any) -> _Stop | None:
        """Read from what `invoke` returned (its last values, and its interrupts), which
        saves reading the checkpoint back; None when that is not enough to know."""
        if not isinstance(output, dict):
            return None
        interrupts = output.get("__interrupt__") or ()
        if not interrupts:
            # Ran to the end. Without an outcome the checkpoints need a look (see `_after_run`).
            return cls((), output, None, True) if output.get("outcome") is not None else None
        kinds = {i.value.get("kind") for i in interrupts if isinstance(i.value, dict)}
        phase = QUESTION_PHASES.get(str(kinds.pop())) if len(kinds) == 1 else None
        return cls(tuple(interrupts), output, phase, False) if phase is not None else None


class GraphRunner:
    """Starts, resumes and continues task graphs; parks and finishes tasks."""

    def __init__(
        self,
        *,
        ledger: db.Ledger,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        checkpointer: BaseCheckpointSaver[Any],
        deps: GraphDeps,
        transport: Transport,
        clock: Callable[[], datetime],
        resume_pauses: Sequence[timedelta],
    ) -> None:
        """Hold the parts a run needs.

        Args:
            resume_pauses: how long a task parked `model_unavailable` waits before
                it continues by itself, park after park (`Settings.resume_pauses`).
        """
        self.ledger = ledger
        self.graph = graph
        self.checkpointer = checkpointer
        self.deps = deps
        self.transport = transport
        self.clock = clock
        self.resume_pauses = tuple(resume_pauses)
        self.observers: list[TaskObserver] = []

    # -- what a command asks for ----------------------------------------------------------

    def start(self, command: db.Command) -> None:
        task = db.get_task(self.ledger, command.task_id)
        if task is None or task.status in TERMINAL_STATUSES:
            return
        snapshot = self.graph.get_state(thread_config(task.id))
        if not snapshot.values and task.phase != Phase.INTAKE:
            # It ran before, yet its thread has no checkpoints: the retention pass pruned
            # them as a retry queued it. Starting over would meet its gates' old answers
            # (same question ids) and could build a plan nobody read.
            self.park(
                task.id,
                "needs_operator",
                "the task's checkpoints were pruned, so it cannot continue; submit it again",
            )
            return
        if not snapshot.values:
            initial: TaskState = {
                "task_id": task.id,
                "kind": task.kind,
                "title": task.title,
                "body": task.body,
                "repo": command.payload.get("repo") or self._submitted_repo(task.id),
            }
            self.notify(task.id, "started", f"agent-team started on {task.title!r}")
            self._run(task.id, initial)
        else:
            self._continue(task.id, snapshot)

    def resume(self, command: db.Command) -> None:
        question_id = str(command.payload.get("question_id"))
        task = db.get_task(self.ledger, command.task_id)
        if task is None or task.status in TERMINAL_STATUSES:
            # An answer stored while its run was still going is used by that run
            # (`_after_run`), which may then finish the task: it was applied, not superseded.
            if task is None or not self._answer_used(task.id, question_id):
                db.supersede_question(self.ledger, question_id=question_id)
            return
        snapshot = self.graph.get_state(thread_config(task.id))
        if self._lane_off(task.id, snapshot):
            return  # the answer stays stored; `agent-team retry` resumes with it
        waiting = [
            pending
            for pending in snapshot.interrupts
            if isinstance(pending.value, dict) and pending.value.get("question_id") == question_id
        ]
        if not waiting:
            if not self._answer_used(task.id, question_id, snapshot):
                # The graph moved on without it: LangGraph would silently ignore the value.
                log.info("task %s no longer waits on %s; superseding it", task.id, question_id)
                db.supersede_question(self.ledger, question_id=question_id)
            self._continue(task.id, snapshot)
            return
        answer = command.payload.get("answer")
        self._run(task.id, GraphCommand(resume={waiting[0].id: answer}))

    def _answer_used(
        self, task_id: str, question_id: str, snapshot: StateSnapshot | None = None
    ) -> bool:
        """Whether the graph got past this question (a gate moves `turn` on once answered)."""
        question = db.get_question(self.ledger, question_id)
        if question is None:
            return False
        snapshot = snapshot or self.graph.get_state(thread_config(task_id))
        return int(snapshot.values.get("turn", 0)) >= question.turn

    def cancel(self, task_id: str) -> None:
        task = db.get_task(self.ledger, task_id)
        if task is None or task.status in TERMINAL_STATUSES:
            return
        self._finish(task_id, TaskStatus.CANCELLED, "cancelled by an operator")

    # -- running ------------------------------------------------------------------------

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
        saved = self.checkpointer.get_tuple(thread_config(task_id))
        channels = saved.checkpoint.get("channel_values", {}) if saved is not None else {}
        if not any(channel.startswith("branch:to:conf_") for channel in channels):
            return False
        # Running it now would end short of `done` and park it as a lost checkpoint.
        self.park(task_id, "confluence_disabled", reports.lane_off_notice(task_id))
        return True

    def _continue(self, task_id: str, snapshot: StateSnapshot) -> None:
        """Pick a graph up where its last checkpoint left it."""
        if self._lane_off(task_id, snapshot):
            return
        # An outcome decided by a node before `done` (a merged PR, a rejected page) is not
        # the end while a next node is still due: a crash there continues to `done`.
        ended = snapshot.values.get("outcome") is not None and not snapshot.next
        if snapshot.interrupts or ended:
            self._after_run(task_id)  # already waiting or finished: make sure it shows
        else:
            # A run cut short (crash). `next` can be empty here: when the step's only task
            # finished and saved its writes before the kill, LangGraph lists no next task
            # until those writes are applied, which invoke(None) does.
            self._run(task_id, None)

    def _run(self, task_id: str, payload: TaskState | GraphCommand[Any] | None) -> None:
        # Every node marks the task running as it enters (nodes/common.enter).
        try:
            output = self.graph.invoke(payload, thread_config(task_id), durability="sync")
        except FencedError:
            raise  # another instance owns the task now: record nothing, stop here
        except ParkingError as exc:
            asked = exc.retry_after_s if isinstance(exc, ModelsDownError) else None
            self.park(
                task_id,
                exc.parked_reason,
                reports.parked_notice(task_id, exc.parked_reason, str(exc)),
                at_least=timedelta(seconds=asked or 0.0),
            )
            return
        except TaskStoppedError as exc:
            if exc.reason == SHUTDOWN:
                raise  # the daemon is going away, not the task wrong: record nothing
            # A cancel or a limit killed the running work (`Worker.stop_overdue`).
            log.info("task %s stopped: %s", task_id, exc.reason)
            if exc.reason == "cancelled":
                self._finish(task_id, TaskStatus.CANCELLED, str(exc))
            else:
                self._finish(task_id, TaskStatus.FAILED, reports.failed_notice(task_id, str(exc)))
            return
        except Exception as exc:
            if db.is_outage(exc):
                raise  # the database is away, not the task wrong: the worker retries it later
            if is_invalid_resume(exc):
                # Refused before LangGraph saved it: the task still waits on its question.
                # Cannot happen for answers that came through inbox.submit_answer (same model).
                log.error("task %s refused a resume value: %s", task_id, redact(str(exc)))
                raise

            message = tail(redact(f"{type(exc).__name__}: {exc}"), 2000)
            log.warning("task %s failed: %s", task_id, message)
            # The note and the notice: the error, then the command that goes on from here.
            self._finish(task_id, TaskStatus.FAILED, reports.failed_notice(task_id, message))
            return
        self._after_run(task_id, _Stop.of_output(output))

    def _after_run(self, task_id: str, stop: _Stop | None = None) -> None:
        if stop is None:
            stop = _Stop.of_snapshot(self.graph.get_state(thread_config(task_id)))
        if stop.interrupts:
            for pending in stop.interrupts:
                value = pending.value if isinstance(pending.value, dict) else {}
                asked = db.get_question(self.ledger, str(value.get("question_id")))
                if asked is not None and asked.status == QuestionStatus.ANSWERED:
                    # Answered before a crash cost the graph its checkpoint: the graph never
                    # consumed the answer, so give it now (once: the next stop is a new turn).
                    self._run(task_id, GraphCommand(resume={pending.id: asked.answer}))
                    return
            if stop.waiting_in is not None:
                db.enter_phase(
                    self.ledger, task_id=task_id, phase=stop.waiting_in, status=TaskStatus.WAITING
                )
            else:
                db.set_task_status(self.ledger, task_id, TaskStatus.WAITING)
            self.deliver_open(task_id)
            kinds = sorted(
                {str(p.value.get("kind")) for p in stop.interrupts if isinstance(p.value, dict)}
            )
            self.notify(task_id, "waiting", reports.waiting_notice(kinds, stop.values))
        elif stop.ended:
            outcome = stop.values.get("outcome")
            if outcome is None:
                # The graph says it ended but its `done` node never ran: a checkpoint was
                # lost (seen after kill -9). Never report that as success.
                self.park(
                    task_id,
                    "needs_operator",
                    "the task's checkpoints end before `done`; inspect it and resubmit",
                )
                return
            status = TaskStatus.CANCELLED if outcome == "cancelled" else TaskStatus.DONE
            note, text = reports.completion_notice(stop.values)
            self._finish(task_id, status, note, text=text)

    # -- recording outcomes -------------------------------------------------------------

    def park(
        self, task_id: str, reason: str, message: str, *, at_least: timedelta = timedelta(0)
    ) -> None:
        """Park a task: its status, a history row with `message` (redacted), the notice.

        A task parked on its models (`model_unavailable`) also gets the pause it
        waits before it continues by itself (`db.park_for_models`: longer park
        after park, never shorter than `at_least`, what a provider's retry-after
        asked), and its message says when that is. Only the first park of a
        streak is told to people: an outage of a day would otherwise post a
        notice an hour; each park is in the task's history all the same.
        """
        task = db.get_task(self.ledger, task_id)
        if task is None:
            return
        note = redact(message)
        if reason == _MODEL_UNAVAILABLE:
            told: list[str] = []

            def with_resume(resume_at: datetime) -> str:
                told.append(redact(f"{message}; {reports.resume_notice(task_id, resume_at)}"))
                return told[-1]

            db.park_for_models(
                self.ledger,
                task_id,
                pauses=self.resume_pauses,
                now=self.clock(),
                at_least=at_least,
                note=with_resume,
            )
            note = told[-1] if told else note
            tell = task.model_parks == 0
        else:
            db.park_task(self.ledger, task_id=task_id, reason=reason, note=note)
            tell = True
        if tell:
            self.notify(task_id, "parked", note)

    def _finish(
        self, task_id: str, status: TaskStatus, note: str | None, *, text: str | None = None
    ) -> None:
        phase = Phase.DONE if status != TaskStatus.FAILED else None
        db.finish_task(self.ledger, task_id=task_id, status=status, phase=phase, note=note)
        self.notify(task_id, status.value, text or note or status.value)

    def notify(self, task_id: str, event: str, text: str) -> None:
        task = db.get_task(self.ledger, task_id)
        if task is None:
            return
        db.check_fence(self.ledger)  # a run fenced off tells nobody anything
        for tell in (self.transport.notify, *self.observers):
            try:
                tell(task, event, text)
            except Exception:  # a notification must never fail the task
                log.exception("could not notify task %s (%s)", task_id, event)

    def deliver_open(
        self, task_id: str | None = None, *, in_flight: Callable[[str], bool] | None = None
    ) -> int:
        """Deliver open questions that have no `channel_ref` yet (docs/architecture.md §3 step 2).

        `in_flight(task_id)` says a run of that task is going on here: that run delivers
        its questions itself when it stops, so a pass over every task leaves them out (it
        would post a second message while the run's post is on its way). Asked before the
        question is read again, so a run that ended meanwhile shows its `channel_ref`.
        """
        delivered = 0
        for question in db.list_questions(self.ledger, status="open", thread_id=task_id):
            if question.channel_ref is not None:
                continue
            if in_flight is not None:
                if in_flight(question.thread_id):
                    continue
                fresh = db.get_question(self.ledger, question.question_id)
                if fresh is None or fresh.status != "open" or fresh.channel_ref is not None:
                    continue
            task = db.get_task(self.ledger, question.thread_id)
            if task is None:
                continue
            db.check_fence(self.ledger)  # never post for a task another instance took over
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
                flush=getattr(self.transport, "posts", True),
            ):
                delivered += 1
        return delivered
