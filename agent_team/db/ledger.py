"""The ledger seam: what every caller holds instead of a database connection.

A `Ledger` owns its connections, its per-thread writers, its transactions and
its dialect, so nothing outside `agent_team.db` knows which driver is behind
it (docs/architecture.md §6). The `db` functions take a `Ledger` (writes) or any `Reader`
(reads: the ledger itself, or one consistent `snapshot()` of it). A backend is
one class implementing this protocol; the contract suite registers a factory
for each (tests/integration/ledger/conftest.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agent_team.db.write_health import WriteHealth

if TYPE_CHECKING:  # LangGraph loads only where a graph runs, not for every CLI read
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = [
    "Cursor",
    "Dialect",
    "Ledger",
    "Params",
    "Reader",
    "Row",
    "Transaction",
    "where_equal",
    "write_statement",
]

_T = TypeVar("_T")

Params = Sequence[Any]


class Row(Protocol):
    """A result row, addressable by column name (and by position on SQLite)."""

    def __getitem__(self, key: Any, /) -> Any: ...

    def keys(self) -> list[str]: ...


class Cursor(Protocol):
    """What a statement returns: how many rows it touched, and its result rows."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Reader(Protocol):
    """Reads by column name; the ledger itself or one `snapshot()` of it."""

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]: ...

    def fetch_one(self, sql: str, params: Params = ()) -> Row | None: ...


class Transaction(Reader, Protocol):
    """The handle a `Ledger.write` unit of work gets; everything on it commits together."""

    def execute(self, sql: str, params: Params = ()) -> Cursor: ...


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between backends' SQL; the `db` modules ask it instead of assuming."""

    name: str
    # How a write transaction starts: SQLite takes its lock up front (no upgrade, so no
    # deadlock); PostgreSQL runs it SERIALIZABLE and retries what it cannot serialise.
    begin_write: str
    # The names (column `name`) of the tables in the ledger's schema.
    list_tables: str
    # Appended to a SELECT of rows a writer must hold still until it commits (a lease row
    # read by a fenced write); SQLite's write lock already does that.
    share_lock: str = ""
    # Appended to the SELECT that picks commands to claim, so concurrent claimers skip
    # each other's rows instead of conflicting; SQLite has one writer at a time anyway.
    skip_locked: str = ""
    # Run inside a write that makes a command runnable, to wake every instance when it
    # commits (`db.wakeups`); empty where the backend has no such channel (SQLite polls).
    announce_commands: str = ""


class Ledger(Reader, Protocol):
    """One ledger database: reads, short write transactions, snapshots, checkpoints."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def location(self) -> str:
        """Where the ledger is, for messages (a path; never a secret)."""
        ...

    @property
    def files_dir(self) -> Path | None:
        """The folder for the ledger's side files (the budget outbox); None if it has none."""
        ...

    @property
    def readonly(self) -> bool: ...

    # The outcomes of this process's writes, for `/readyz`, `/metrics` and `doctor`.
    write_health: WriteHealth

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        """One statement on its own (autocommit): maintenance reads and tests."""
        ...

    def write(self, work: Callable[[Transaction], _T], *, flush: bool = True) -> _T:
        """Run `work` in one write transaction, re-running it from the start on a busy lock.

        `flush=False` is for history only (a task entering a phase): the commit does
        not wait for the disk. It is as atomic and as ordered as any other, and the
        next flushed commit on the database (a claim, an answer, a budget row, the
        gate's question) makes it durable with itself: both backends write one log
        in commit order and a flush covers everything before it. A process killed outright
        loses nothing; only a power cut can lose such commits after the last flush.
        Never use it for an answer, a claim, a question or a side effect.

        Raises:
            LedgerBusyError: the lock stayed busy through every attempt.
            LedgerIntegrityError: a constraint refused a row (nothing was stored).
            LedgerStorageError: the database failed otherwise.
        """
        ...

    def write_together(self, work: Callable[[Transaction], _T]) -> _T:
        """`write` for people's answers, which come in bursts: writes that arrive at once
        may share one transaction, each in a savepoint of its own (all or nothing per
        call), and one flush. Never inside a fenced run."""
        ...

    def snapshot(self) -> AbstractContextManager[Reader]:
        """Several reads that see one state of the ledger (a page and its cost map)."""
        ...

    def checkpointer(
        self, *, flush_only: Collection[str] | None = None
    ) -> BaseCheckpointSaver[Any]:
        """The LangGraph saver for this ledger, set up once and closed with it.

        `flush_only`: the channels whose writes are the protocol's durable points
        (the composition root names them: the gate's interrupt, the answer it
        consumed, the build result). Every other checkpoint and node write then
        commits without waiting for the disk; the next flushed commit covers it
        (`fenced_savers`). None: every write is flushed when this call makes the
        saver, and no preference when it exists already.

        Raises:
            LedgerError: the saver was made with other channels.
        """
        ...

    def listen_for_commands(
        self,
        on_wake: Callable[[], None],
        stop: threading.Event,
        *,
        beat: Callable[[], None] | None = None,
    ) -> None:
        """Call `on_wake` whenever any instance makes a command runnable, until `stop`.

        Returns at once where `dialect.announce_commands` is empty (no channel:
        the worker polls). Survives connection losses by itself (reconnecting
        with back-off, waking once after each reconnect); `beat` is called at
        least every second while it runs.
        """
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Ledger: ...

    def __exit__(self, *exc: object) -> None: ...


def write_statement(ledger: Ledger, sql: str, params: Params = (), *, flush: bool = True) -> int:
    """One statement in a write transaction of its own; how many rows it changed.

    Most compare-and-sets are exactly this: the `WHERE` holds the expected
    state, and a count of 0 means another writer got there first.
    """
    return ledger.write(lambda tx: tx.execute(sql, params).rowcount, flush=flush)


def where_equal(filters: dict[str, object | None]) -> tuple[str, list[object]]:
    """`WHERE a = ? AND b = ?` for the filters that are not None (column names are ours)."""
    used = {column: value for column, value in filters.items() if value is not None}
    if not used:
        return "", []
    return "WHERE " + " AND ".join(f"{column} = ?" for column in used), list(used.values())
