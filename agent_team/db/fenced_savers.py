"""LangGraph savers whose writes are fenced like the ledger's (DESIGN.md §6).

A run that was paused past its lease must not write checkpoints into a
thread its new owner is running: the late checkpoint would become the
thread's newest and fork its history. Each saver checks the run's fence
(`fencing.check_fence`, a read of the lease row) for `put` and
`put_writes`. The SQLite saver reads it inside the transaction of the
write, under the write lock, so a fenced run lands nothing. The PostgreSQL
saver reads it just before: a pause of exactly that width can still land
one write there; every ledger write of the run after it is refused
in-transaction.

The SQLite saver also runs a step hook (`step_hook`) inside the commit of a
checkpoint that makes a node the thread's next step: the coordinator enters
that node's phase there, one commit per node boundary instead of two.

The PostgreSQL saver lives in `fenced_postgres_saver` so the SQLite default
never imports psycopg.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.sqlite import SqliteSaver

from agent_team.db.fencing import check_fence
from agent_team.db.ledger import Cursor, Params, Row, Transaction

__all__ = ["FencedSqliteSaver", "StepHook"]

# Called inside the commit of a checkpoint of thread `thread_id` whose next step runs
# `nodes`; returns what to run once that commit has succeeded, or None.
StepHook = Callable[[Transaction, str, tuple[str, ...]], Callable[[], None] | None]
_NEXT_NODE = "branch:to:"  # the channel an edge writes to trigger its node (LangGraph 1.x)


class _InTransaction:
    """The saver's connection as a `Transaction`, inside a write it already holds the lock for."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        return self._conn.execute(sql, params)

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        cur = self._conn.cursor()
        cur.row_factory = sqlite3.Row
        try:
            return list(cur.execute(sql, params).fetchall())
        finally:
            cur.close()

    def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.fetch_all(sql, params)
        return rows[0] if rows else None


class FencedSqliteSaver(SqliteSaver):
    """`SqliteSaver` that refuses a fenced run's writes once its lease moved on."""

    step_hook: StepHook | None = None
    _fenced = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next_step = threading.local()  # put() -> its own commit, on the same thread

    def fence_on_own_connection(self) -> None:
        """Check the run's fence inside each write (LangGraph writes from executor threads;
        the saver's own connection spares each of them a connection of its own)."""
        self._fenced = True

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """`SqliteSaver.cursor`, with the fence check and the step hook inside the write.

        Unlike upstream (which commits in `finally`), a write that raised is
        rolled back: a fenced run, or a failed hook, leaves no checkpoint.
        """
        step: tuple[str, tuple[str, ...]] | None = getattr(self._next_step, "value", None)
        self._next_step.value = None
        with self.lock:
            self.setup()
            cur = self.conn.cursor()
            after: Callable[[], None] | None = None
            try:
                yield cur
                if transaction:
                    tx = _InTransaction(self.conn)
                    if self._fenced:
                        check_fence(tx)
                    if step is not None and self.step_hook is not None:
                        after = self.step_hook(tx, *step)
            except BaseException:
                if transaction and self.conn.in_transaction:
                    self.conn.rollback()
                raise
            else:
                if transaction:
                    self.conn.commit()
            finally:
                cur.close()
        if after is not None:
            after()

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        # A trigger channel holds a value until its node has run: these nodes run next.
        values = checkpoint.get("channel_values") or {}
        nodes = tuple(c[len(_NEXT_NODE) :] for c in values if c.startswith(_NEXT_NODE))
        if nodes and not config["configurable"].get("checkpoint_ns"):
            self._next_step.value = (str(config["configurable"]["thread_id"]), nodes)
        return super().put(config, checkpoint, metadata, new_versions)
