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

The PostgreSQL saver lives in `fenced_postgres_saver` so the SQLite default
never imports psycopg.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from langgraph.checkpoint.sqlite import SqliteSaver

from agent_team.db.fencing import check_fence
from agent_team.db.ledger import Params, Row
from agent_team.db.sqlite_ledger import fetch_rows

__all__ = ["FencedSqliteSaver"]


class _InTransaction:
    """The saver's connection as a `Reader`, inside a write it already holds the lock for."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        return fetch_rows(self._conn, sql, params)

    def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.fetch_all(sql, params)
        return rows[0] if rows else None


class FencedSqliteSaver(SqliteSaver):
    """`SqliteSaver` that refuses a fenced run's writes once its lease moved on."""

    _fenced = False

    def fence_on_own_connection(self) -> None:
        """Check the run's fence inside each write (LangGraph writes from executor threads;
        the saver's own connection spares each of them a connection of its own)."""
        self._fenced = True

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """`SqliteSaver.cursor`, with the fence checked inside the write, before its commit.

        Unlike upstream (which commits in `finally`), a write that raised is
        rolled back: a fenced run, or a write cut short, leaves nothing.
        """
        with self.lock:
            self.setup()
            cur = self.conn.cursor()
            try:
                yield cur
                if transaction and self._fenced:
                    check_fence(_InTransaction(self.conn))
            except BaseException:
                if transaction and self.conn.in_transaction:
                    self.conn.rollback()
                raise
            else:
                if transaction:
                    self.conn.commit()
            finally:
                cur.close()
