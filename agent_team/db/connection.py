"""Opening the ledger and running short write transactions on it.

Why writes never use the caller's connection: a `sqlite3.Connection` has one
transaction state, so threads sharing it could interleave `BEGIN`/`COMMIT`.
Every compare-and-set therefore runs on a connection owned by the calling
thread (opened once, reused, dropped after any error), takes the
write lock up front with `BEGIN IMMEDIATE` (no lock upgrade, so no deadlock
between readers turning writers), and retries a bounded number of times when
the lock stays busy past the busy timeout.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from agent_team.exceptions import LedgerBusyError, LedgerError, LedgerInputError

__all__ = [
    "BUSY_TIMEOUT_S",
    "WRITE_ATTEMPTS",
    "LedgerConnection",
    "connect",
    "connect_for_checkpoints",
    "connect_readonly",
    "fetch_all",
    "fetch_one",
    "ledger_path",
    "where_equal",
    "write_transaction",
]

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 10.0
WRITE_ATTEMPTS = 5
_T = TypeVar("_T")


class LedgerConnection(sqlite3.Connection):
    """A sqlite3 connection that remembers the file it was opened on."""

    ledger_file: Path
    file_id: tuple[int, int] | None = None


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)


def connect(path: str | Path) -> LedgerConnection:
    """Open the ledger file: WAL, busy timeout, foreign keys, autocommit.

    The busy timeout is given to `sqlite3.connect` so it is in force before the
    first statement (switching to WAL itself needs a lock). Autocommit
    (`isolation_level=None`) means every transaction in this package is an
    explicit `BEGIN IMMEDIATE`. `check_same_thread=False` lets threads share
    the connection for reads; writes take their own (see module docstring).

    Args:
        path: the SQLite file; its parent folder is created if missing.
    """
    file = Path(path)
    if str(file) == ":memory:":
        raise LedgerInputError(
            "the ledger must be a file (writes use their own connections); pass a path"
        )
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        conn = _open(file.resolve())
        _switch_to_wal(conn)
    except (OSError, sqlite3.DatabaseError) as exc:
        raise LedgerError(
            f"cannot open {file} as a SQLite ledger ({exc}); check --db / AGENT_TEAM_DB_PATH"
        ) from None
    return conn


def connect_for_checkpoints(path: str | Path) -> LedgerConnection:
    """The connection LangGraph's `SqliteSaver` writes checkpoints on.

    Unlike `connect()` it is *not* in autocommit mode: `SqliteSaver` writes a
    node's outputs with one `executemany` and commits when its cursor closes.
    In autocommit mode every row would be its own transaction, so a `kill -9`
    in the middle could leave part of a node's writes, which LangGraph then
    takes as the node's whole result (seen in the crash tests: a plan review
    that "finished" without its route to `build`). Here Python opens one
    `BEGIN IMMEDIATE` before the first write and the saver's commit ends it.
    """
    conn = connect(path)
    conn.isolation_level = "IMMEDIATE"
    return conn


def connect_readonly(path: str | Path) -> sqlite3.Connection:
    """A read-only connection (dashboard, status): it can never write or create the file.

    Raises:
        LedgerError: the file is missing or not a SQLite database.
    """
    file = Path(path)
    if not file.is_file():
        raise LedgerError(f"no ledger at {file}; create it with `agent-team migrate --db {file}`")
    conn = sqlite3.connect(
        f"{file.resolve().as_uri()}?mode=ro",
        uri=True,
        timeout=BUSY_TIMEOUT_S,
        isolation_level=None,
        check_same_thread=False,
    )
    return conn


def _switch_to_wal(conn: sqlite3.Connection) -> None:
    """WAL is a property of the file and persists, so only `connect()` sets it.

    Switching a file that is not yet in WAL mode needs the write lock after a
    read lock, and SQLite then reports "locked" at once instead of using the
    busy timeout; so wait for the other writer here, up to the same timeout.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(random.uniform(0.005, 0.05))


def _open(file: Path) -> LedgerConnection:
    conn = sqlite3.connect(
        file,
        timeout=BUSY_TIMEOUT_S,
        isolation_level=None,
        check_same_thread=False,
        factory=LedgerConnection,
    )
    conn.ledger_file = file
    conn.file_id = _file_id(file)
    # Per-connection settings: every connection needs them, not just the first.
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def ledger_path(conn: sqlite3.Connection) -> Path:
    """The file behind a connection, so a write can open its own connection to it."""
    if isinstance(conn, LedgerConnection):
        return conn.ledger_file
    for _seq, name, file in conn.execute("PRAGMA database_list").fetchall():
        if name == "main" and file:
            return Path(file)
    raise LedgerInputError(
        "this connection is not backed by a file; open the ledger with agent_team.db.connect(path)"
    )


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


_WRITERS_PER_THREAD = 4
_writers = threading.local()


def _writer(path: Path) -> LedgerConnection:
    """This thread's write connection to `path` (a few per thread, least recently used out).

    Each thread owns its connections, so no transaction state is ever shared
    between threads; reusing them saves opening a file per compare-and-set.
    The process id is part of the key: a connection must not cross a fork.
    """
    cache: OrderedDict[tuple[int, Path], LedgerConnection] | None = getattr(_writers, "conns", None)
    if cache is None:
        cache = _writers.conns = OrderedDict()
    key = (os.getpid(), path)
    conn = cache.get(key)
    if conn is not None and conn.file_id != _file_id(path):
        # The file was replaced (a restore, a test's new ledger): never write to the old one.
        del cache[key]
        conn.close()
        conn = None
    if conn is None:
        conn = cache[key] = _open(path)
        while len(cache) > _WRITERS_PER_THREAD:
            _key, oldest = cache.popitem(last=False)
            oldest.close()
    cache.move_to_end(key)
    return conn


def _drop_writer(path: Path) -> None:
    cache: OrderedDict[tuple[int, Path], LedgerConnection] | None = getattr(_writers, "conns", None)
    conn = cache.pop((os.getpid(), path), None) if cache is not None else None
    if conn is not None:
        conn.close()


def write_transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], _T]) -> _T:
    """Run `work` in one `BEGIN IMMEDIATE` transaction on this thread's own connection.

    `work` must be safe to re-run from the start: on a busy lock the whole
    transaction is rolled back and tried again, at most `WRITE_ATTEMPTS` times.
    After any error the connection is closed and a fresh one is used next.

    Raises:
        LedgerBusyError: the lock stayed busy through every attempt.
    """
    path = ledger_path(conn)
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        try:
            own = _writer(path)
            own.execute("BEGIN IMMEDIATE")
            try:
                result = work(own)
                own.execute("COMMIT")
            except BaseException:
                if own.in_transaction:
                    own.execute("ROLLBACK")
                raise
            return result
        except sqlite3.OperationalError as exc:
            _drop_writer(path)
            if not _is_busy(exc):
                raise
            log.warning("ledger busy (attempt %d of %d): %s", attempt, WRITE_ATTEMPTS, exc)
            time.sleep(min(0.05 * 2**attempt, 1.0) * random.uniform(0.5, 1.5))
        except BaseException:
            _drop_writer(path)
            raise
    raise LedgerBusyError(
        f"the ledger {path} stayed locked through {WRITE_ATTEMPTS} attempts; "
        "check for a process holding a long write transaction"
    )


def fetch_all(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
    """Rows by column name, whatever row factory the connection has."""
    cur = conn.cursor()
    cur.row_factory = sqlite3.Row
    try:
        return list(cur.execute(sql, params).fetchall())
    finally:
        cur.close()


def fetch_one(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
    rows = fetch_all(conn, sql, params)
    return rows[0] if rows else None


def where_equal(filters: dict[str, object | None]) -> tuple[str, list[object]]:
    """`WHERE a = ? AND b = ?` for the filters that are not None (column names are ours)."""
    used = {column: value for column, value in filters.items() if value is not None}
    if not used:
        return "", []
    return "WHERE " + " AND ".join(f"{column} = ?" for column in used), list(used.values())
