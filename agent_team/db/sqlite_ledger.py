"""The embedded ledger: one SQLite file in WAL mode (the default backend).

Why writes never use the shared connection: a `sqlite3.Connection` has one
transaction state, so threads sharing it could interleave `BEGIN`/`COMMIT`.
Every write transaction therefore runs on a connection owned by the calling
thread (opened once, reused, dropped after any error), takes the write lock
up front with `BEGIN IMMEDIATE` (no lock upgrade, so no deadlock between
readers turning writers), and retries a bounded number of times when the lock
stays busy past the busy timeout.

Driver errors stop here: callers see `LedgerError` subclasses only.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from agent_team.db.fencing import check_fence, current_fence
from agent_team.db.group_commit import GroupCommit
from agent_team.db.ledger import Cursor, Dialect, Params, Row, Transaction
from agent_team.db.open_errors import explain
from agent_team.db.outage import refused_by_database
from agent_team.db.sqlite_rows import fetch_rows
from agent_team.db.write_health import WriteHealth
from agent_team.exceptions import (
    LedgerBusyError,
    LedgerError,
    LedgerInputError,
    LedgerIntegrityError,
    LedgerStorageError,
)

if TYPE_CHECKING:  # LangGraph loads only where a graph runs, not for every CLI read
    from agent_team.db.fenced_savers import FencedSqliteSaver

__all__ = [
    "BUSY_TIMEOUT_S",
    "SQLITE",
    "WRITE_ATTEMPTS",
    "SqliteLedger",
]

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 10.0
WRITE_ATTEMPTS = 5
SQLITE = Dialect(
    name="sqlite",
    begin_write="BEGIN IMMEDIATE",
    list_tables="SELECT name FROM sqlite_master WHERE type = 'table'",
)
_T = TypeVar("_T")


class _Connection(sqlite3.Connection):
    """A sqlite3 connection that remembers which file (device, inode) it was opened on."""

    file_id: tuple[int, int] | None = None


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def storage_error(exc: sqlite3.Error, where: Path) -> LedgerStorageError:
    """The `LedgerError` a driver error becomes (the driver's text kept for the operator)."""
    if isinstance(exc, sqlite3.IntegrityError):
        return LedgerIntegrityError(f"the ledger {where} refused a row: {exc}")
    explained = explain(exc, where)
    if explained is not None:
        return explained
    return LedgerStorageError(
        f"the ledger {where} failed: {exc}; check it with `agent-team doctor --db {where}`"
    )


def _open(file: Path, *, readonly: bool = False) -> _Connection:
    target: str | Path = f"{file.as_uri()}?mode=ro" if readonly else file
    conn = sqlite3.connect(
        target,
        uri=readonly,
        timeout=BUSY_TIMEOUT_S,
        isolation_level=None,
        check_same_thread=False,
        factory=_Connection,
    )
    conn.file_id = _file_id(file)
    if not readonly:
        # Per-connection settings: every connection needs them, not just the first.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _incremental_vacuum_if_new(conn: sqlite3.Connection) -> None:
    """Make a new, empty file give pruned pages back (`db.reclaim_space`) without `VACUUM`.

    The mode is fixed by the first table and, on an empty file, by the switch
    to WAL, so it is set before either; on a file with pages it is left as it is.
    """
    if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")


def _switch_to_wal(conn: sqlite3.Connection) -> None:
    """WAL is a property of the file and persists, so only opening for writes sets it.

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


class _Tx:
    """A write transaction's handle: the thread's own connection, constraint errors translated."""

    __slots__ = ("_conn", "_where")

    def __init__(self, conn: sqlite3.Connection, where: Path) -> None:
        self._conn = conn
        self._where = where

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.IntegrityError as exc:
            raise storage_error(exc, self._where) from exc

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        return fetch_rows(self._conn, sql, params)

    def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        rows = fetch_rows(self._conn, sql, params)
        return rows[0] if rows else None


class _Snapshot:
    """Reads inside one read transaction (a WAL snapshot) on a connection of its own."""

    __slots__ = ("_conn", "_where")

    def __init__(self, conn: sqlite3.Connection, where: Path) -> None:
        self._conn = conn
        self._where = where

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        try:
            return fetch_rows(self._conn, sql, params)
        except sqlite3.Error as exc:
            raise storage_error(exc, self._where) from exc

    def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.fetch_all(sql, params)
        return rows[0] if rows else None

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise storage_error(exc, self._where) from exc


_WRITERS_PER_THREAD = 4
_writers = threading.local()


def _writer(path: Path) -> _Connection:
    """This thread's write connection to `path` (a few per thread, least recently used out).

    Each thread owns its connections, so no transaction state is ever shared
    between threads; reusing them saves opening a file per compare-and-set.
    The process id is part of the key: a connection must not cross a fork.
    """
    cache: OrderedDict[tuple[int, Path], _Connection] | None = getattr(_writers, "conns", None)
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
    cache: OrderedDict[tuple[int, Path], _Connection] | None = getattr(_writers, "conns", None)
    conn = cache.pop((os.getpid(), path), None) if cache is not None else None
    if conn is not None:
        conn.close()


class SqliteLedger:
    """The ledger in one SQLite file; safe to share between threads.

    Reads and writes each go through the calling thread's own connection
    (threads sharing one SQLite connection queue on its mutex, and a write
    needs a transaction state of its own: see the module docstring);
    snapshots and the checkpointer through connections of their own.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        file = Path(path)
        if str(file) == ":memory:":
            raise LedgerInputError(
                "the ledger must be a file (writes use their own connections); pass a path"
            )
        self._readonly = readonly
        if readonly:
            if not file.is_file():
                raise LedgerError(
                    f"no ledger at {file}; create it with `agent-team migrate --db {file}`"
                )
            self._path = file.resolve()
            self._conn = _open(self._path, readonly=True)
        else:
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
                self._path = file.resolve()
                self._conn = _open(self._path)
                _incremental_vacuum_if_new(self._conn)
                _switch_to_wal(self._conn)
            except (OSError, sqlite3.DatabaseError) as exc:
                explained = explain(exc, file.absolute())
                if explained is not None:
                    raise explained from None
                raise LedgerError(
                    f"cannot open {file} as a SQLite ledger ({exc}); "
                    "check --db / AGENT_TEAM_DB_PATH"
                ) from None
        self._closed = False
        self._local = threading.local()
        self._local.conn = self._conn
        # Weak: a reader belongs to its thread (held by `_local`) and closes when the thread
        # ends; this set only lets `close()` reach the ones still open. A plain list kept
        # every short-lived thread's connection (LangGraph runs steps on fresh threads).
        self._readers: weakref.WeakSet[_Connection] = weakref.WeakSet([self._conn])
        self._readers_guard = threading.Lock()
        self._saver: FencedSqliteSaver | None = None
        self._saver_conn: sqlite3.Connection | None = None
        self._saver_guard = threading.Lock()
        self._together = GroupCommit(self.write)
        self.write_health = WriteHealth()

    def __repr__(self) -> str:
        return f"SqliteLedger({str(self._path)!r}{', readonly=True' if self._readonly else ''})"

    # -- what callers may ask -------------------------------------------------------------

    @property
    def dialect(self) -> Dialect:
        return SQLITE

    @property
    def path(self) -> Path:
        return self._path

    @property
    def location(self) -> str:
        return str(self._path)

    @property
    def files_dir(self) -> Path | None:
        return self._path.parent

    @property
    def readonly(self) -> bool:
        return self._readonly

    def _reader(self) -> sqlite3.Connection:
        """This thread's autocommit connection for reads, opened on its first read."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise LedgerError(f"the ledger {self._path} was closed; nothing was read")
            opened = self._local.conn = _open(self._path, readonly=self._readonly)
            with self._readers_guard:
                self._readers.add(opened)
            conn = opened
        return conn

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        try:
            return fetch_rows(self._reader(), sql, params)
        except sqlite3.Error as exc:
            raise storage_error(exc, self._path) from exc

    def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.fetch_all(sql, params)
        return rows[0] if rows else None

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        try:
            return self._reader().execute(sql, params)
        except sqlite3.Error as exc:
            raise storage_error(exc, self._path) from exc

    def write(self, work: Callable[[Transaction], _T], *, flush: bool = True) -> _T:
        """Run `work` in one `BEGIN IMMEDIATE` transaction on this thread's own connection.

        `work` must be safe to re-run from the start: on a busy lock the whole
        transaction is rolled back and tried again, at most `WRITE_ATTEMPTS` times.
        After any error the connection is closed and a fresh one is used next.
        `flush=False` (see `Ledger.write`) commits under `synchronous = NORMAL`:
        in WAL mode that skips the fsync, and the next FULL commit of any
        connection syncs the same log file, this commit included.
        """
        # A refused row, a fence or a bug in `work` is not the database refusing writes.
        return self.write_health.record(lambda: self._write(work, flush=flush), refused_by_database)

    def _write(self, work: Callable[[Transaction], _T], *, flush: bool) -> _T:
        if self._readonly:
            raise LedgerError(f"the ledger {self._path} was opened read-only; nothing was written")
        path = self._path
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                own = _writer(path)
                if not flush:
                    own.execute("PRAGMA synchronous = NORMAL")
                try:
                    own.execute("BEGIN IMMEDIATE")
                    try:
                        tx = _Tx(own, path)
                        check_fence(tx)
                        result = work(tx)
                        own.execute("COMMIT")
                    except BaseException:
                        if own.in_transaction:
                            own.execute("ROLLBACK")
                        raise
                finally:
                    if not flush:
                        own.execute("PRAGMA synchronous = FULL")
                return result
            except sqlite3.OperationalError as exc:
                _drop_writer(path)
                if not _is_busy(exc):
                    raise storage_error(exc, path) from exc
                log.warning("ledger busy (attempt %d of %d): %s", attempt, WRITE_ATTEMPTS, exc)
                time.sleep(min(0.05 * 2**attempt, 1.0) * random.uniform(0.5, 1.5))
            except sqlite3.Error as exc:
                _drop_writer(path)
                raise storage_error(exc, path) from exc
            except BaseException:
                _drop_writer(path)
                raise
        raise LedgerBusyError(
            f"the ledger {path} stayed locked through {WRITE_ATTEMPTS} attempts; "
            "check for a process holding a long write transaction"
        )

    def write_together(self, work: Callable[[Transaction], _T]) -> _T:
        """`write`, grouped with the others that arrive while a commit is flushing
        (`db.group_commit`): SQLite has one writer and one fsync per commit."""
        if current_fence() is not None:
            return self.write(work)
        return self._together.run(work)

    @contextmanager
    def snapshot(self) -> Iterator[_Snapshot]:
        """Several reads in one transaction on a connection of their own (never blocks writers).

        Without it a page of tasks and its cost map could come from two
        different moments.
        """
        try:
            conn = _open(self._path, readonly=self._readonly)
            conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise storage_error(exc, self._path) from exc
        try:
            yield _Snapshot(conn, self._path)
        finally:
            try:
                if conn.in_transaction:
                    conn.execute("COMMIT")  # nothing was written; this only ends the snapshot
            finally:
                conn.close()

    def checkpointer(self, *, flush_only: Collection[str] | None = None) -> FencedSqliteSaver:
        """LangGraph's `SqliteSaver` on a connection of its own, in transaction mode.

        `flush_only`: see `Ledger.checkpointer`.

        Not autocommit: `SqliteSaver` writes a node's outputs with one
        `executemany` and commits when its cursor closes. In autocommit mode
        every row would be its own transaction, so a `kill -9` in the middle
        could leave part of a node's writes, which LangGraph then takes as the
        node's whole result (seen in the crash tests: a plan review that
        "finished" without its route to `build`). Here Python opens one
        `BEGIN IMMEDIATE` before the first write and the saver's commit ends it.
        """
        if self._readonly:
            raise LedgerError(
                f"the ledger {self._path} was opened read-only; it keeps no checkpoints"
            )
        from agent_team.db.fenced_savers import FencedSqliteSaver

        with self._saver_guard:
            if self._saver is None:
                try:
                    conn = _open(self._path)
                    conn.isolation_level = "IMMEDIATE"
                    saver = FencedSqliteSaver(conn)
                    saver.fence_on_own_connection()
                    if flush_only is not None:
                        saver.flush.flush_only(flush_only)
                    saver.setup()
                except sqlite3.Error as exc:
                    raise storage_error(exc, self._path) from exc
                self._saver_conn, self._saver = conn, saver
            self._saver.flush.require(flush_only)
            return self._saver

    def listen_for_commands(
        self,
        on_wake: Callable[[], None],
        stop: threading.Event,
        *,
        beat: Callable[[], None] | None = None,
    ) -> None:
        """SQLite has no channel between processes: returns at once (the worker polls)."""

    def close(self) -> None:
        self._closed = True
        with self._saver_guard:
            if self._saver_conn is not None:
                self._saver_conn.close()
                self._saver_conn = self._saver = None
        with self._readers_guard:
            readers = list(self._readers)
            self._readers.clear()
        for conn in readers:
            conn.close()

    def __enter__(self) -> SqliteLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- for `db/` only: migrations and backups need the driver itself -----------------------

    def raw(self) -> sqlite3.Connection:
        """This thread's connection, for the schema and backup code inside `db/`."""
        return self._reader()
