"""The worker: claims commands from the ledger's inbox and runs them on a bounded pool.

A command is claimed together with its task's execution lease (`db.claim_runs`),
and the run's every write is fenced by that lease's epoch (`db.fenced`): if
this instance stalls past its lease and another takes the task over, whatever
this run still tries to write is refused and the run stops (docs/architecture.md §6).
While runs go on, a renewer thread extends their leases every third of
`lease_s`. One job per task runs that task's commands in the order they were
queued; different tasks run in parallel on `workers` threads.

A cancel or a time limit must reach a run that is working, not wait for it:
a watcher thread looks every `stop_every_s` at the runs going on here, and
for a task with a cancel queued (by any instance: the command is in the
shared ledger) or a run older than `task_timeout_s` it kills the task's
running build (`builders.proc.stop_tagged`) and makes its next node stop
(`nodes.common.enter`); the run then ends the task `cancelled` or `failed`.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from datetime import UTC, datetime

from agent_team import db
from agent_team.builders.proc import stop_tagged
from agent_team.common.redact import redact
from agent_team.common.stops import SHUTDOWN, forget_stop, stop_requested
from agent_team.coordinator.runner import GraphRunner
from agent_team.exceptions import FencedError, TaskStoppedError
from agent_team.task_model import CommandKind

__all__ = ["Worker", "instance_id"]

log = logging.getLogger(__name__)

_ids_guard = threading.Lock()
_ids_taken: set[str] = set()


def instance_id() -> str:
    """`host:pid:start-time`: names this process in leases, claims and `/healthz`.

    Unique per Worker even when tests build several in one process in the same
    microsecond (the start time is moved on by one microsecond).
    """
    host, pid = socket.gethostname(), os.getpid()
    moment = datetime.now(UTC)
    with _ids_guard:
        while True:
            candidate = f"{host}:{pid}:{moment:%Y%m%dT%H%M%S.%fZ}"
            if candidate not in _ids_taken:
                _ids_taken.add(candidate)
                return candidate
            moment = moment.replace(microsecond=(moment.microsecond + 1) % 1_000_000)


class _TaskLock:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


class Worker:
    """The claims, the pool, the leases and the runs in flight of one process."""

    def __init__(
        self,
        ledger: db.Ledger,
        runner: GraphRunner,
        *,
        workers: int,
        lease_s: float,
        task_timeout_s: float = 0.0,
        stop_every_s: float = 1.0,
    ) -> None:
        self.ledger = ledger
        self.task_timeout_s = task_timeout_s
        self.stop_every_s = stop_every_s
        self._started: dict[str, float] = {}  # task id -> when its run here began (monotonic)
        self.runner = runner
        self.workers = workers
        self.lease_s = lease_s
        self.consumer = instance_id()
        self.wake = threading.Event()
        self.fenced_runs = 0  # runs stopped because another instance took their task over
        self.outages = 0  # runs stopped because the database could not be reached
        self._locks: dict[str, _TaskLock] = {}
        self._locks_guard = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agent-team-run")
        self._in_flight: set[Future[None]] = set()
        self._in_flight_guard = threading.Lock()
        self._held: dict[str, db.Fence] = {}  # task id -> fence of a run going on here
        self._held_guard = threading.Lock()
        # The last lease this instance gave up, per task (a number that only grows across all
        # tasks, and when): a claim made before it has a stale fence. Old ones are forgotten
        # (`_prune_releases`); the numbers never repeat, so forgetting cannot hide a release.
        self._releases: dict[str, tuple[int, float]] = {}
        self._release_numbers = itertools.count(1)
        self._closing = threading.Event()
        self._renewer = threading.Thread(
            target=self._renew_loop, name="agent-team-lease-renewer", daemon=True
        )
        self._renewer.start()
        self._stopper = threading.Thread(
            target=self._stop_loop, name="agent-team-stop-watch", daemon=True
        )
        self._stopper.start()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._closing.set()
        self._renewer.join(timeout=5)
        self._stopper.join(timeout=5)

    @property
    def running(self) -> dict[str, db.Fence]:
        """The tasks this instance runs now, with their fences."""
        with self._held_guard:
            return dict(self._held)

    @contextmanager
    def _task_lock(self, task_id: str) -> Iterator[None]:
        """One job per task at a time. An entry lives only while some job holds or waits for
        it (a count), so the map does not keep one lock per task ever run."""
        with self._locks_guard:
            entry = self._locks.get(task_id)
            if entry is None:
                entry = self._locks[task_id] = _TaskLock()
            entry.users += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._locks_guard:
                entry.users -= 1
                if entry.users == 0:
                    del self._locks[task_id]

    def dispatch(self, slots: int) -> list[Future[None]]:
        """Claim up to `slots` runnable commands and start them; every finished job sets `wake`."""
        if slots < 1:
            return []
        with self._held_guard:  # read before claiming: see `_fence_for`
            released_before = {task: count for task, (count, _) in self._releases.items()}
        claims = db.claim_runs(
            self.ledger, consumer=self.consumer, limit=slots, lease_s=self.lease_s
        )
        # One job per task runs its commands in the order they were queued (a cancel
        # queued before a resume is handled first); different tasks run in parallel.
        by_task: dict[str, list[db.Claim]] = {}
        for claim in claims:
            by_task.setdefault(claim.command.task_id, []).append(claim)
        futures = [
            self._pool.submit(self._handle_in_order, batch, released_before.get(task_id, 0))
            for task_id, batch in by_task.items()
        ]
        for future in futures:
            future.add_done_callback(lambda _: self.wake.set())
        return futures

    def run_pending(self) -> int:
        """Claim up to `workers` runnable commands, run them, wait; returns how many ran."""
        futures = self.dispatch(self.workers)
        for future in futures:
            future.result()
        return len(futures)

    def fill(self) -> None:
        """Start as many commands as there are free threads, keeping the runs in flight."""
        with self._in_flight_guard:
            self._in_flight = {future for future in self._in_flight if not future.done()}
            free = self.workers - len(self._in_flight)
        started = self.dispatch(free)
        with self._in_flight_guard:
            self._in_flight.update(started)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait for the runs `fill` started; False if some are still going after `timeout_s`."""
        with self._in_flight_guard:
            pending = list(self._in_flight)
        _done, not_done = wait(pending, timeout=timeout_s)
        return not not_done

    def _fence_for(self, claims: list[db.Claim], released_before: int) -> db.Fence | None:
        """The fence to run `claims` under; None if another instance holds the task now.

        A task's lease may be claimed again by its holder while a run of it goes on
        here (an answer comes in while the run that asked is still delivering). That
        claim renews the lease under the same epoch, and the run in flight releases
        it when it ends, so the claim's fence no longer matches the lease: take the
        lease again (the next epoch) instead of being refused at the first write.
        """
        task_id = claims[0].command.task_id
        with self._held_guard:
            unchanged = self._releases.get(task_id, (0, 0.0))[0] == released_before
        if unchanged:
            return claims[-1].fence  # one claim transaction: the same fence for the batch
        return db.acquire_lease(
            self.ledger,
            name=db.task_lease_name(task_id),
            owner=self.consumer,
            lease_s=self.lease_s,
        )

    def _handle_in_order(self, claims: list[db.Claim], released_before: int = 0) -> None:
        task_id = claims[0].command.task_id
        with self._task_lock(task_id):
            fence = self._fence_for(claims, released_before)
            if fence is None:
                log.info("task %s runs on another instance; its commands wait", task_id)
                for claim in claims:  # back to pending, for the instance that holds the task
                    db.release_command(
                        self.ledger, command_id=claim.command.command_id, consumer=self.consumer
                    )
                return
            with self._held_guard:
                self._held[task_id] = fence
                self._started[task_id] = time.monotonic()
            released = False
            try:
                for number, claim in enumerate(claims, start=1):
                    ok, released = self._handle(claim.command, fence, last=number == len(claims))
                    if not ok:
                        break  # fenced: the task is another instance's now
            finally:
                with self._held_guard:
                    self._held.pop(task_id, None)
                    self._started.pop(task_id, None)
                forget_stop(task_id)  # the run that was told to stop has ended
                if not released:
                    try:
                        db.release_lease(self.ledger, fence)
                    except Exception:  # it runs out by itself; never hide the run's outcome
                        log.exception("could not release the lease of task %s", task_id)
                with self._held_guard:  # after the release: a claim that saw the old count is stale
                    self._releases[task_id] = (next(self._release_numbers), time.monotonic())

    def _handle(
        self, command: db.Command, fence: db.Fence, *, last: bool = False
    ) -> tuple[bool, bool]:
        """`handle`, and for the `last` command of a run also give the lease up with its
        completion, in one transaction; returns (ran, lease released)."""
        released = False
        try:
            with db.fenced(fence):
                try:
                    self._run(command)
                    if last:  # the renewer must not renew a lease about to be given up
                        with self._held_guard:
                            self._held.pop(command.task_id, None)
                    released = (
                        db.complete_command(
                            self.ledger,
                            command_id=command.command_id,
                            consumer=self.consumer,
                            release=fence if last else None,
                        )
                        and last
                    )
                except FencedError:
                    raise
                except TaskStoppedError as exc:
                    if exc.reason != SHUTDOWN:
                        raise  # the runner records every other stop itself
                    # The daemon stops without waiting: the command goes back to pending,
                    # for the next start here (or another daemon of the database) to run
                    # from the task's last checkpoint.
                    log.info("command %s stopped with the daemon", command.command_id)
                    db.release_command(
                        self.ledger, command_id=command.command_id, consumer=self.consumer
                    )
                    return False, released
                except Exception as exc:
                    if db.is_outage(exc):
                        # Nothing about the task is wrong: keep the claim, which lapses after
                        # lease_s, and this or another instance runs the command again then.
                        self.outages += 1
                        log.warning(
                            "command %s waits for the database: %s",
                            command.command_id,
                            redact(str(exc)),
                        )
                        return False, released
                    log.exception("command %s failed", command.command_id)
                    db.fail_command(
                        self.ledger,
                        command_id=command.command_id,
                        error=redact(str(exc)),
                        retry=command.attempts < 3,
                        consumer=self.consumer,
                    )
        except FencedError as exc:
            self.fenced_runs += 1
            log.warning("task %s: %s", command.task_id, exc)
            return False, released
        return True, released

    def _run(self, command: db.Command) -> None:
        if command.kind == CommandKind.CANCEL:
            self.runner.cancel(command.task_id)
        elif command.kind == CommandKind.RESUME:
            self.runner.resume(command)
        else:
            self.runner.start(command)

    def _renew_loop(self) -> None:
        while not self._closing.wait(self.lease_s / 3):
            self.renew()
            self._prune_releases()

    def _stop_loop(self) -> None:
        while not self._closing.wait(self.stop_every_s):
            try:
                self.stop_overdue()
            except Exception:  # the ledger is away: the next round looks again
                log.exception("could not look for cancels of running tasks")

    def stop_overdue(self) -> dict[str, str]:
        """Stop the runs going on here that were cancelled or passed the task time limit.

        Returns:
            task id -> why, for each run told to stop now.
        """
        with self._held_guard:
            started = dict(self._started)
        now = time.monotonic()
        stopped: dict[str, str] = {}
        for task_id, began in started.items():
            if stop_requested(task_id) is not None:
                continue  # told already; a build that starts after is refused
            cancel = db.get_command(self.ledger, f"cancel:{task_id}")
            if cancel is not None and cancel.state in ("pending", "claimed"):
                stopped[task_id] = "cancelled"
            elif self.task_timeout_s > 0 and now - began > self.task_timeout_s:
                stopped[task_id] = "task_timeout"
        told: dict[str, str] = {}
        for task_id, reason in stopped.items():
            # Only the run that was judged: one that ended meanwhile has forgotten its stop
            # (`_handle_in_order`), and a reason set now would stop the task's next run.
            with self._held_guard:
                if self._started.get(task_id) != started[task_id]:
                    continue
                killed = stop_tagged(task_id, reason)
            told[task_id] = reason
            log.info("task %s: %s; %d running process group(s) stopped", task_id, reason, killed)
        return told

    def stop_all(self, reason: str) -> list[str]:
        """Tell every run going on here to stop now, killing its builds; the task ids.

        For a daemon that will not wait for its runs (`common.stops.SHUTDOWN`).
        """
        with self._held_guard:
            tasks = list(self._started)
        for task_id in tasks:
            killed = stop_tagged(task_id, reason)
            log.info("task %s: %s; %d running process group(s) stopped", task_id, reason, killed)
        return tasks

    def _prune_releases(self) -> None:
        """Forget releases older than two leases, so the map does not grow with every task
        ever run. A claim that read a forgotten number sees a different one (0, or a newer
        release's) and takes the lease again: one extra write, never a stale fence."""
        horizon = time.monotonic() - 2 * self.lease_s
        with self._held_guard:
            for task_id in [t for t, (_, at) in self._releases.items() if at < horizon]:
                del self._releases[task_id]

    def renew(self) -> set[str]:
        """Extend the leases of the runs going on here; returns the task ids still held."""
        fences = self.running
        if not fences:
            return set()
        try:
            held = db.renew_leases(self.ledger, fences.values(), lease_s=self.lease_s)
        except Exception:  # the ledger is away: the next round tries again
            log.exception("could not renew %d lease(s)", len(fences))
            return set()
        lost = {name.removeprefix("task:") for name in {f.name for f in fences.values()} - held}
        # A run that ended meanwhile gave its lease up itself: not lost, nothing to say.
        still = self.running
        for task_id in sorted(t for t in lost if still.get(t) == fences.get(t)):
            log.warning("task %s: lease lost to another instance; its run will stop", task_id)
        return {name.removeprefix("task:") for name in held}
