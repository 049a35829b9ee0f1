"""LangGraph savers whose writes are fenced like the ledger's (docs/architecture.md §6), and flushed
to disk only at the protocol's durable points (docs/architecture.md §3, durability budget).

A run that was paused past its lease must not write checkpoints into a
thread its new owner is running: the late checkpoint would become the
thread's newest and fork its history. Each saver checks the run's fence
(`fencing.check_fence`, a read of the lease row) for `put` and
`put_writes`. The SQLite saver reads it inside the transaction of the
write, under the write lock, so a fenced run lands nothing. The PostgreSQL
saver reads it just before: a pause of exactly that width can still land
one write there; every ledger write of the run after it is refused
in-transaction.

Flushing: with `flush_only(channels)`, a checkpoint or node write commits
without waiting for the disk (SQLite `synchronous = NORMAL`, PostgreSQL
`synchronous_commit = off`) unless it writes one of `channels` (the gate's
interrupt, the answer it consumed, the build result). Such a commit survives
`kill -9` (it is in the OS, or in the server); only a power cut can lose it,
and then only together with everything after it, because both databases
flush their log in order:
the next flushed commit of anyone (a budget row, a question's delivery, an
effect, the run's completion) makes every commit before it durable too. So
a power cut costs at most the steps of the run since the last flush, which
the run's claim (stored with a flush) runs again; nothing leaves the process
before a flush.

The PostgreSQL saver lives in `fenced_postgres_saver` so the SQLite default
never imports psycopg.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.sqlite import SqliteSaver

from agent_team.db.fencing import check_fence
from agent_team.db.ledger import Params, Row
from agent_team.db.sqlite_rows import fetch_rows
from agent_team.exceptions import LedgerError

__all__ = ["FencedSqliteSaver", "FlushPolicy", "FlushesAtDurablePoints"]


class FlushPolicy:
    """Which saver writes wait for the disk: all of them, or only those to some channels.

    The decision is per thread (LangGraph writes from executor threads), taken
    by `put`/`put_writes` and read by the commit they lead to.
    """

    def __init__(self) -> None:
        self._channels: frozenset[str] | None = None  # None: every write is flushed
        self._local = threading.local()

    def flush_only(self, channels: Collection[str]) -> None:
        self._channels = frozenset(channels)

    def require(self, channels: Collection[str] | None) -> None:
        """Refuse a caller asking for other `channels` than this policy's (None: no
        preference): one saver per ledger, so its policy is named once.

        Raises:
            LedgerError: the saver flushes other channels than the caller's.
        """
        if channels is not None and frozenset(channels) != self._channels:
            raise LedgerError(
                "this ledger's checkpointer was made with other durable channels; "
                "name them once, where the graph is built"
            )

    @contextmanager
    def deciding(self, writes: Sequence[tuple[str, Any]] | None) -> Iterator[None]:
        """While the caller writes `writes` (None: a checkpoint), on this thread."""
        channels = self._channels
        durable = channels is None or (
            writes is not None and any(channel in channels for channel, _ in writes)
        )
        self._local.lazy = not durable
        try:
            yield
        finally:
            self._local.lazy = False

    @property
    def flush_now(self) -> bool:
        """Whether the commit this thread is about to make must wait for the disk (anything
        not decided by `deciding`, such as deleting a thread, is flushed)."""
        return not getattr(self._local, "lazy", False)


class _InTransaction:
    """The saver's connection as a `Reader`, inside a write it already holds the lock for."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        return fetch_rows(self._conn, sql, params)

    def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.fetch_all(sql, params)
        return rows[0] if rows else None


class FlushesAtDurablePoints:
    """Mixin for a LangGraph saver: `put` and `put_writes` decide whether the commit they
    lead to waits for the disk (`flush`), after `_before_write`'s checks."""

    flush: FlushPolicy

    def _before_write(self) -> None:
        """Checks a write must pass first (the PostgreSQL saver's fence)."""

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._before_write()
        with self.flush.deciding(None):
            result: RunnableConfig = super().put(  # type: ignore[misc]
                config, checkpoint, metadata, new_versions
            )
            return result

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._before_write()
        with self.flush.deciding(writes):
            super().put_writes(config, writes, task_id, task_path)  # type: ignore[misc]


class FencedSqliteSaver(FlushesAtDurablePoints, SqliteSaver):
    """`SqliteSaver` that refuses a fenced run's writes once its lease moved on, and flushes
    only the writes its `flush` policy names."""

    _fenced = False
    _synchronous_full = True  # the connection's level now (it is opened with FULL)

    def __init__(self, conn: sqlite3.Connection, **kwargs: Any) -> None:
        super().__init__(conn, **kwargs)
        self.flush = FlushPolicy()

    def fence_on_own_connection(self) -> None:
        """Check the run's fence inside each write (LangGraph writes from executor threads;
        the saver's own connection spares each of them a connection of its own)."""
        self._fenced = True

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """`SqliteSaver.cursor`, with the fence checked inside the write, before its commit.

        Unlike upstream (which commits in `finally`), a write that raised, or whose
        commit failed, is rolled back: a fenced run, or a write cut short, leaves
        nothing, and no later write commits it under its own level.
        """
        with self.lock:
            self.setup()
            if transaction:
                if self.conn.in_transaction:  # only a failed write leaves one: it stored nothing
                    self.conn.rollback()
                self._synchronous(full=self.flush.flush_now)
            cur = self.conn.cursor()
            try:
                yield cur
                if transaction:
                    if self._fenced:
                        check_fence(_InTransaction(self.conn))
                    self.conn.commit()
            except BaseException:
                if transaction and self.conn.in_transaction:
                    self.conn.rollback()
                raise
            finally:
                cur.close()

    def _synchronous(self, *, full: bool) -> None:
        """Set the level the next commit uses (SQLite refuses to change it inside a
        transaction, so this runs before the write opens one)."""
        if full != self._synchronous_full:
            self.conn.execute(f"PRAGMA synchronous = {'FULL' if full else 'NORMAL'}")
            self._synchronous_full = full
