"""Following a task from an answer to wherever it settles, for `runs.wait` and `runs.stream`.

The coordinator of this daemon tells us (as an observer) when one of its
tasks starts, waits on a question, parks or ends, and that wakes the
request at once. Another daemon of a PostgreSQL cluster may run the task
instead, and phase entries are not events, so the ledger is also read every
`poll_s`: a progress event is at most that late, a settled task never
missed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import suppress

from agent_team import db
from agent_team.task_model import TERMINAL_STATUSES, QuestionStatus, TaskStatus

__all__ = ["TaskChanges", "settled"]

POLL_S = 0.25


def settled(task: db.Task, questions: list[db.Question], answered: str) -> bool:
    """Whether a task resumed by the answer to `answered` has stopped moving on its own."""
    if task.status in TERMINAL_STATUSES or task.status == TaskStatus.PARKED:
        return True
    return task.status == TaskStatus.WAITING and any(
        q.status == QuestionStatus.OPEN and q.question_id != answered for q in questions
    )


class TaskChanges:
    """Wakes the requests following a task when this daemon's coordinator reports on it."""

    def __init__(self, *, poll_s: float = POLL_S) -> None:
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._waiting: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def observe(self, task: db.Task, event: str, text: str) -> None:
        """A coordinator observer: never raises, never blocks the run that calls it."""
        del event, text
        self.notify(task.id)

    def notify(self, task_id: str) -> None:
        with self._lock:
            waiting = list(self._waiting.get(task_id, ()))
        for loop, woken in waiting:
            with suppress(RuntimeError):  # that request's loop already closed
                loop.call_soon_threadsafe(woken.set)

    async def changes(self, task_id: str, *, timeout_s: float) -> AsyncIterator[None]:
        """Yields now, then after each report or poll interval, until `timeout_s` passes."""
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()
        entry = (loop, woken)
        with self._lock:
            self._waiting.setdefault(task_id, set()).add(entry)
        try:
            deadline = loop.time() + timeout_s
            while True:
                yield
                left = deadline - loop.time()
                if left <= 0:
                    return
                with suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), timeout=min(self.poll_s, left))
                woken.clear()
        finally:
            with self._lock:
                entries = self._waiting.get(task_id)
                if entries is not None:
                    entries.discard(entry)
                    if not entries:
                        del self._waiting[task_id]
