"""Group commit: writes that arrive together share one transaction and one disk flush.

Why: on SQLite every commit waits for an fsync, and only one writer commits at
a time, so fifty answers clicked at once queue for fifty flushes one after
another. Here the first caller leads: it takes every write queued so far, runs
each inside a savepoint of one `BEGIN IMMEDIATE` transaction, and commits once.
A write that raises is rolled back to its savepoint alone and its caller gets
the exception; the others commit. A failed commit fails every write of the
group and stores none of them. Writes that come in while a group commits form
the next group, led by the first of them, so no caller waits behind more than
the group in flight and its own.

Only for writes with no fence (answers from people, not graph runs): the
group runs on the leader's thread, where another caller's fence would not be
seen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from agent_team.db.ledger import Transaction

__all__ = ["GroupCommit"]

_T = TypeVar("_T")

_SAVEPOINT = "agent_team_group_item"


class _Pending(Generic[_T]):
    """One caller's write, and what became of it."""

    __slots__ = ("done", "error", "lead", "value", "work")

    def __init__(self, work: Callable[[Transaction], _T]) -> None:
        self.work = work
        self.done = threading.Event()
        self.lead = False  # set with `done` when this caller must lead the next group
        self.value: _T | None = None
        self.error: BaseException | None = None

    def outcome(self) -> _T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


class GroupCommit:
    """Runs writes through `write` (one transaction each call), several per transaction."""

    def __init__(self, write: Callable[[Callable[[Transaction], Any]], Any]) -> None:
        self._write = write
        self._guard = threading.Lock()
        self._queue: list[_Pending[Any]] = []
        self._leading = False
        self.groups = 0  # transactions committed (or tried)
        self.writes = 0  # writes they carried

    def run(self, work: Callable[[Transaction], _T]) -> _T:
        """Run `work` (re-runnable, as for any ledger write) in the next group; its result."""
        mine: _Pending[_T] = _Pending(work)
        with self._guard:
            self._queue.append(mine)
            lead = not self._leading
            self._leading = True
        if not lead:
            mine.done.wait()
            if not mine.lead:
                return mine.outcome()
            mine.done.clear()  # promoted: this caller leads the group it is in
        self._lead(mine)
        return mine.outcome()

    def _lead(self, mine: _Pending[Any]) -> None:
        with self._guard:
            group, self._queue = self._queue, []
        try:
            self._commit(group)
        finally:
            with self._guard:
                if self._queue:  # the next group: its first caller leads it
                    self._queue[0].lead = True
                    self._queue[0].done.set()
                else:
                    self._leading = False
        assert mine.done.is_set()

    def _commit(self, group: list[_Pending[Any]]) -> None:
        def work(tx: Transaction) -> list[tuple[bool, Any]]:
            outcomes: list[tuple[bool, Any]] = []
            for pending in group:
                tx.execute(f"SAVEPOINT {_SAVEPOINT}")
                try:
                    value = pending.work(tx)
                except Exception as exc:
                    tx.execute(f"ROLLBACK TO {_SAVEPOINT}")
                    tx.execute(f"RELEASE {_SAVEPOINT}")
                    outcomes.append((False, exc))
                else:
                    tx.execute(f"RELEASE {_SAVEPOINT}")
                    outcomes.append((True, value))
            return outcomes

        self.groups += 1
        self.writes += len(group)
        try:
            outcomes = self._write(work)
        except BaseException as exc:  # nothing of the group was stored
            for pending in group:
                pending.error = exc
                pending.done.set()
            return
        for pending, (ok, value) in zip(group, outcomes, strict=True):
            if ok:
                pending.value = value
            else:
                pending.error = value
            pending.done.set()
