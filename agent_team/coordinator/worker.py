"""The worker: claims commands from the ledger's inbox and runs them on a bounded pool.

Commands are claimed with a lease, so a crashed process's claims can be
taken back (the sweeper does). One job per task runs that task's commands
in the order they were queued, never two runs of one task at once in this
process; different tasks run in parallel on `workers` threads.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager

from agent_team import db
from agent_team.coordinator.runner import GraphRunner
from agent_team.redact import redact
from agent_team.task_model import CommandKind

__all__ = ["Worker"]

log = logging.getLogger(__name__)


class Worker:
    """The claims, the pool and the runs in flight of one process."""

    def __init__(
        self, ledger: db.Ledger, runner: GraphRunner, *, workers: int, lease_s: float
    ) -> None:
        self.ledger = ledger
        self.runner = runner
        self.workers = workers
        self.lease_s = lease_s
        self.consumer = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.wake = threading.Event()
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agent-team-run")
        self._in_flight: set[Future[None]] = set()
        self._in_flight_guard = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    @contextmanager
    def _task_lock(self, task_id: str) -> Iterator[None]:
        with self._locks_guard:
            lock = self._locks.setdefault(task_id, threading.Lock())
        with lock:
            yield

    def dispatch(self, slots: int) -> list[Future[None]]:
        """Claim up to `slots` runnable commands and start them; every finished job sets `wake`."""
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

    def _handle_in_order(self, commands: list[db.Command]) -> None:
        for command in commands:
            self.handle(command)

    def handle(self, command: db.Command) -> None:
        try:
            with self._task_lock(command.task_id):
                if command.kind == CommandKind.CANCEL:
                    self.runner.cancel(command.task_id)
                elif command.kind == CommandKind.RESUME:
                    self.runner.resume(command)
                else:
                    self.runner.start(command)
            db.complete_command(self.ledger, command_id=command.command_id, consumer=self.consumer)
        except Exception as exc:  # a bug or an unreachable ledger: keep the command for a retry
            log.exception("command %s failed", command.command_id)
            db.fail_command(
                self.ledger,
                command_id=command.command_id,
                error=redact(str(exc)),
                retry=command.attempts < 3,
                consumer=self.consumer,
            )
