"""Why a task's running work must stop: a cancel, a time limit, a budget passed.

One registry per process, by tag (a task id). The worker's stop watcher
(`coordinator.worker.Worker.stop_overdue`) writes it; what runs the work reads
it: a build's process group is killed (`builders.proc.stop_tagged`), a model
call in flight is abandoned (`models.caller`), the next node does not start
(`nodes.common.enter`). In `common` because the builders and the model caller,
both capabilities, stop the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from agent_team.exceptions import TaskStoppedError

__all__ = [
    "SHUTDOWN",
    "forget_stop",
    "request_stop",
    "stop_requested",
    "stopped_error",
    "watching",
]

# The daemon is stopping and will not wait for the run (a second Ctrl-C, or its stop grace
# ran out): unlike a cancel or a limit, nothing is wrong with the task, so nothing about it
# is recorded; the next start continues it from its last checkpoint.
SHUTDOWN = "shutdown"

_lock = threading.Lock()
_reasons: dict[str, str] = {}
# Events of work in flight that wants to know at once (a model call waiting on a reply).
_watchers: dict[str, set[threading.Event]] = {}

_STOPPED = {
    "cancelled": "an operator cancelled the task; its running {what} was stopped",
    "task_timeout": "the task's run passed AGENT_TEAM_TASK_TIMEOUT; its running {what} was "
    "stopped (raise the limit or split the task)",
    "budget": "its cost passed what was left of today's cap "
    "(AGENT_TEAM_DAILY_BUDGET_USD); its running {what} was stopped",
    SHUTDOWN: "the daemon stopped; its running {what} was stopped and runs again from its "
    "beginning on the next start",
}


def request_stop(tag: str, reason: str) -> bool:
    """Record why `tag` must stop and wake its watchers; False if it was told already.

    The first reason given wins, until `forget_stop(tag)`.
    """
    with _lock:
        if tag in _reasons:
            return False
        _reasons[tag] = reason
        watchers = list(_watchers.get(tag, ()))
    for event in watchers:
        event.set()
    return True


def stop_requested(tag: str) -> str | None:
    """Why `tag` was told to stop, or None."""
    with _lock:
        return _reasons.get(tag)


def forget_stop(tag: str) -> None:
    """Let work under `tag` start again (the run that was told to stop has ended)."""
    with _lock:
        _reasons.pop(tag, None)


@contextmanager
def watching(tag: str, event: threading.Event) -> Iterator[None]:
    """Set `event` when `tag` is told to stop (at once if it was told already)."""
    with _lock:
        _watchers.setdefault(tag, set()).add(event)
        told = tag in _reasons
    if told:
        event.set()
    try:
        yield
    finally:
        with _lock:
            left = _watchers.get(tag)
            if left is not None:
                left.discard(event)
                if not left:
                    del _watchers[tag]


def stopped_error(reason: str, what: str, *, usage: object | None = None) -> TaskStoppedError:
    """The task-level error for work a stop ended, with a note that names why."""
    text = _STOPPED.get(reason, "its running {what} was stopped: " + reason)
    return TaskStoppedError(reason, text.format(what=what), usage=usage)
