"""The sweeper: recovery after a crash, question deadlines, budget and model unparking, pruning.

These are the passes that put a half-finished state back on its way
(docs/architecture.md §4) and the timers that change tasks without anyone asking. Each
pass is idempotent, so running it twice (a restart, `agent-team tick`
beside the daemon) changes nothing the second time.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from agent_team import db
from agent_team.coordinator.runner import GraphRunner
from agent_team.reports import task as reports
from agent_team.task_model import CommandKind, TaskStatus

__all__ = ["CHECKPOINT_BATCH", "EVENT_RETENTION", "SweepReport", "Sweeper"]

log = logging.getLogger(__name__)

# Slack retries an event for minutes and GitHub redelivers on request for days; a
# week of seen event ids covers both, and the table stays small.
EVENT_RETENTION = timedelta(days=7)
# Finished tasks whose checkpoints one pass deletes at most: a pass stays a fraction of a
# second, and a backlog (a first run after an upgrade) drains over several passes.
CHECKPOINT_BATCH = 200


@dataclass
class SweepReport:
    """What one recovery sweep did; `describe()` is how logs and `tick` say it."""

    delivered: int = 0
    resumes_added: int = 0
    claims_released: int = 0
    tasks_continued: int = 0
    expired: int = 0

    def describe(self) -> str:
        """`delivered 0, continued 1, released 0`, and the rest when they happened (a log
        line for people, not the class's repr)."""
        parts = [
            f"delivered {self.delivered}",
            f"continued {self.tasks_continued}",
            f"released {self.claims_released}",
        ]
        if self.resumes_added:
            parts.append(f"resumes added {self.resumes_added}")
        if self.expired:
            parts.append(f"expired {self.expired}")
        return ", ".join(parts)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Sweeper:
    """The recovery sweep and the timers of one process."""

    def __init__(
        self,
        ledger: db.Ledger,
        runner: GraphRunner,
        *,
        consumer: str,
        clock: Callable[[], datetime],
        checkpoint_retention: timedelta = timedelta(days=7),
    ) -> None:
        self.ledger = ledger
        self.runner = runner
        self.consumer = consumer
        self.clock = clock
        self.checkpoint_retention = checkpoint_retention

    def check_deadlines(self) -> int:
        """Expire overdue questions and park their tasks. Never defaults an approval to yes."""
        expired = 0
        for question in db.overdue_questions(self.ledger, self.clock()):
            if not db.expire_question(self.ledger, question_id=question.question_id):
                continue  # answered in the meantime: the answer won
            expired += 1
            self.runner.park(
                question.thread_id, "question_expired", reports.expired_notice(question)
            )
        return expired

    def prune_events(self) -> int:
        """Forget inbound event ids (Slack, GitHub deliveries) older than `EVENT_RETENTION`,
        `Idempotency-Key`s older than `db.KEY_WINDOW` (a key names one request that long),
        GitHub sign-in states a day after they expired (kept that long only so a late
        callback is told why), and the rows of daemons not seen for `db.DAEMON_KEPT`
        (stopped or gone a week ago); returns how many rows went."""
        now = self.clock()
        removed = db.prune_events(self.ledger, older_than=now - EVENT_RETENTION)
        if removed:
            log.info("forgot %d event id(s) older than %s", removed, EVENT_RETENTION)
        keys = db.prune_idempotency_keys(self.ledger, older_than=now - db.KEY_WINDOW)
        if keys:
            log.info("forgot %d idempotency key(s) older than %s", keys, db.KEY_WINDOW)
        states = db.prune_oauth_states(self.ledger, older_than=now - db.OAUTH_STATE_KEPT)
        if states:
            log.info("forgot %d expired GitHub sign-in state(s)", states)
        daemons = db.prune_daemons(self.ledger, older_than=now - db.DAEMON_KEPT)
        if daemons:
            log.info("forgot %d daemon(s) not seen for %s", daemons, db.DAEMON_KEPT)
        return removed + keys + states + daemons

    def prune_checkpoints(self, *, limit: int = CHECKPOINT_BATCH) -> int:
        """Delete the LangGraph threads of tasks finished longer than the retention ago.

        A done or cancelled task never runs again, a failed one only through a
        retry, which refuses it once the retention has passed (in the same
        compare-and-set that queues it, `db.requeue_task`), and everything
        `show`, the API and the dashboard read of it is in our own tables, so
        its checkpoints are dead weight once the retention has passed.
        Live tasks (queued, running, waiting, parked) are never touched. The
        thread is deleted before the task is marked, so a crash in between only
        repeats a delete of nothing; the marks are one transaction. A retention
        of 0 keeps every checkpoint.

        Returns:
            How many tasks' checkpoints were deleted in this pass (at most `limit`).
        """
        if self.checkpoint_retention <= timedelta(0):
            return 0
        now = self.clock()
        try:
            cutoff = now - self.checkpoint_retention
        except OverflowError:  # a retention longer than the calendar: nothing is that old
            return 0
        deleted: list[str] = []
        for task in db.finished_unpruned(self.ledger, older_than=cutoff, limit=limit):
            try:
                self.runner.checkpointer.delete_thread(task.id)
            except Exception:  # the saver's driver errors are not ours: try again next pass
                log.exception(
                    "could not delete the checkpoints of task %s; retrying later", task.id
                )
                break
            deleted.append(task.id)
        pruned = db.mark_checkpoints_pruned(self.ledger, deleted, at=now)  # one commit
        if pruned:
            pages = db.reclaim_space(self.ledger)
            log.info(
                "pruned the checkpoints of %d finished task(s) older than %s (%d page(s) freed)",
                pruned,
                self.checkpoint_retention,
                pages,
            )
        return pruned

    def unpark_budget(self) -> int:
        """Tasks parked on today's budget continue once the UTC day has turned."""
        today = db.day_bucket(self.clock())
        resumed = 0
        for task in db.parked_before(self.ledger, reason="budget_exhausted", day=today):
            db.set_task_status(self.ledger, task.id, TaskStatus.QUEUED, phase=task.phase)
            db.enqueue_command(
                self.ledger,
                command_id=f"unpark:{task.id}:{today}:{uuid.uuid4().hex[:6]}",
                kind=CommandKind.START.value,
                task_id=task.id,
                payload={},
            )
            resumed += 1
        return resumed

    def unpark_models(self) -> int:
        """Tasks parked on their models (`model_unavailable`) continue once their pause is over.

        Each is queued with a `start` command that continues its graph from the
        last checkpoint (`db.resume_model_park`: a compare-and-set on the park,
        its history row and the command in one transaction), so the call that
        gave up is made again and nothing before it. A task retried or parked
        anew meanwhile is left alone.
        """
        now = self.clock()
        resumed = 0
        for task in db.due_model_parks(self.ledger, now=now):
            resumed += int(
                db.resume_model_park(
                    self.ledger,
                    task_id=task.id,
                    command_id=f"unpark:{task.id}:{uuid.uuid4().hex[:8]}",
                    now=now,
                )
            )
        return resumed

    def _all_tasks(self, status: TaskStatus) -> list[db.Task]:
        found: list[db.Task] = []
        while True:
            page = db.list_tasks(self.ledger, status=status.value, limit=500, offset=len(found))
            found.extend(page)
            if len(page) < 500:
                return found

    def _dead_here(self, owner: str | None) -> bool:
        """An instance of this host whose process is gone (or this process's earlier life)."""
        parts = (owner or "").split(":")
        if len(parts) != 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
            return False
        pid = int(parts[1])
        if pid == os.getpid():
            return owner != self.consumer
        return not _pid_alive(pid)

    def _release_dead_claims(self) -> int:
        """Claims and leases of this host's dead processes: picked up at once, not after the lease.

        Only this host's: another host's instance may be alive; its leases run out by
        themselves if it is not.
        """
        released = 0
        for command in db.list_commands(self.ledger, state="claimed"):
            if self._dead_here(command.claimed_by) and db.release_command(
                self.ledger, command_id=command.command_id, consumer=command.claimed_by or ""
            ):
                released += 1
        for owner in db.lease_owners(self.ledger):
            if self._dead_here(owner):
                db.release_leases_of(self.ledger, owner)
        return released

    def recovery_sweep(self) -> SweepReport:
        """Put every half-finished thing back on its way after a crash (docs/architecture.md §4)."""
        report = SweepReport(claims_released=self._release_dead_claims())
        for question in db.answered_without_resume(self.ledger):
            report.resumes_added += int(
                db.enqueue_command(
                    self.ledger,
                    command_id=db.resume_command_id(question.question_id),
                    kind=CommandKind.RESUME.value,
                    task_id=question.thread_id,
                    payload={"question_id": question.question_id, "answer": question.answer},
                )
            )
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
                    self.ledger,
                    command_id=f"recover:{task.id}:{uuid.uuid4().hex[:8]}",
                    kind=CommandKind.START.value,
                    task_id=task.id,
                    payload={},
                )
                report.tasks_continued += 1
        report.delivered = self.runner.deliver_open()
        report.expired = self.check_deadlines()
        return report
