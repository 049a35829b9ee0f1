"""Fencing: every write a task run makes is refused once another instance took its lease.

A run sets its `Fence` (lease name, owner, epoch) for the thread it runs on
(and the threads LangGraph copies the context into) with `fenced()`. Every
`Ledger.write` made under a fence first reads the lease row in the same
transaction and refuses the write with `FencedError` if the owner or epoch
moved on. On SQLite the write lock serialises that read with a takeover; on
PostgreSQL the read holds a share lock on the lease row, so a takeover and a
fenced write cannot both commit (docs/architecture.md §6).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from agent_team.db.ledger import Reader, Transaction
from agent_team.exceptions import FencedError

__all__ = [
    "Fence",
    "FenceCounters",
    "check_fence",
    "counters",
    "current_fence",
    "fenced",
]


@dataclass(frozen=True, slots=True)
class Fence:
    """Who may write for a lease: its name, the instance that holds it, and the epoch it got."""

    name: str
    owner: str
    epoch: int


class FenceCounters:
    """Leases taken over and writes refused because one moved on (`/metrics`), per process."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self.refused = 0
        self.takeovers = 0

    def count_refused(self) -> None:
        with self._guard:
            self.refused += 1

    def count_takeover(self) -> None:
        with self._guard:
            self.takeovers += 1


counters = FenceCounters()
_current: ContextVar[Fence | None] = ContextVar("agent_team_fence", default=None)


def current_fence() -> Fence | None:
    """The fence of the run on this thread, if any."""
    return _current.get()


@contextmanager
def fenced(fence: Fence) -> Iterator[Fence]:
    """Make every ledger write on this thread (and its copied contexts) conditional on `fence`."""
    token = _current.set(fence)
    try:
        yield fence
    finally:
        _current.reset(token)


def check_fence(tx: Reader | Transaction, fence: Fence | None = None, *, lock: str = "") -> None:
    """Raise `FencedError` unless `fence` (default: this thread's) still holds its lease.

    `lock` is the backend's row-lock clause (`FOR SHARE` on PostgreSQL), so a
    takeover waits for this transaction or this transaction fails to serialise.
    """
    fence = fence if fence is not None else _current.get()
    if fence is None:
        return
    row = tx.fetch_one(f"SELECT owner, epoch FROM leases WHERE name = ?{lock}", (fence.name,))
    if row is None or row["owner"] != fence.owner or int(row["epoch"]) != fence.epoch:
        counters.count_refused()
        holder = "nobody" if row is None or row["owner"] is None else str(row["owner"])
        epoch = "none" if row is None else str(row["epoch"])
        raise FencedError(
            f"{fence.name}: this run's lease (epoch {fence.epoch}, {fence.owner}) was taken "
            f"over (now epoch {epoch}, held by {holder}); this run stops and writes nothing more"
        )
