"""The ledger on PostgreSQL: psycopg 3 through a `psycopg_pool.ConnectionPool`.

The `db` modules write one SQL text for both backends with `?` placeholders;
this module turns `?` into psycopg's `%s` (outside string literals, cached per
statement). Reads are autocommit statements on a pooled connection. A write
transaction is `SERIALIZABLE`, so the read-then-write units of work the `db`
modules rely on (a compare-and-set, "claim unless another consumer holds this
task") behave as under SQLite's one-writer-at-a-time `BEGIN IMMEDIATE`; when
PostgreSQL cannot serialise two of them it aborts one, and `write` re-runs it
from the start a bounded number of times before raising `LedgerBusyError`.

Nothing imports psycopg until a `postgresql://` ledger is opened, so SQLite
users need neither the driver nor the `[postgres]` extra. Driver errors stop
here: callers see `LedgerError` subclasses only, and no message holds the
URL's password.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agent_team.db.fencing import check_fence
from agent_team.db.ledger import Cursor, Dialect, Params, Row, Transaction
from agent_team.db.outage import refused_by_database
from agent_team.db.url import DATABASE_URL_VARIABLE, password_of, redact_url
from agent_team.db.wakeups import COMMANDS_CHANNEL
from agent_team.db.write_health import WriteHealth
from agent_team.exceptions import (
    DatabaseUnreachableError,
    LedgerBusyError,
    LedgerError,
    LedgerIntegrityError,
    LedgerStorageError,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

    from agent_team.db.fenced_postgres_saver import FencedPostgresSaver

__all__ = [
    "CONNECTIONS_PER_DAEMON",
    "LOCK_KEY",
    "POSTGRES",
    "WRITE_ATTEMPTS",
    "PostgresLedger",
    "until_locked",
]

log = logging.getLogger(__name__)

WRITE_ATTEMPTS = 10
CONNECT_TIMEOUT_S = 10
# How long a caller waits for a pooled connection. Short: when the database is away,
# `/healthz` must answer 503 promptly and the worker go back to its back-off.
POOL_WAIT_S = 5.0
POOL_SIZE = 10
SAVER_POOL_SIZE = 2
# What one daemon may hold at once: the ledger's pool, the saver's, and the LISTEN session.
CONNECTIONS_PER_DAEMON = POOL_SIZE + SAVER_POOL_SIZE + 1
# One advisory lock key for everything that must happen once per database: our
# migrations (transaction-scoped) and LangGraph's checkpoint setup (session-scoped).
LOCK_KEY = 0x6167_656E_7474_6D01  # "agenttm" + 1
POSTGRES = Dialect(
    name="postgres",
    begin_write="BEGIN ISOLATION LEVEL SERIALIZABLE",
    list_tables=(
        "SELECT table_name AS name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
    ),
    share_lock=" FOR SHARE",
    skip_locked=" FOR UPDATE SKIP LOCKED",
    announce_commands=f"SELECT pg_notify('{COMMANDS_CHANNEL}', '')",
)
# How long the listener waits for a notification before it beats and looks at `stop`.
LISTEN_IDLE_S = 0.5
LISTEN_RECONNECT_MAX_S = 5.0
# A LISTEN session sends nothing of its own, so a connection cut without a reset (a NAT
# or load balancer dropping it idle) would go unnoticed: it asks the server this often.
LISTEN_PING_S = 30.0
# serialization_failure, deadlock_detected: PostgreSQL asks for the transaction again.
_RETRY_SQLSTATES = frozenset({"40001", "40P01"})
_T = TypeVar("_T")


@lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """`?` placeholders as psycopg's `%s`, and a literal `%` doubled; quoted text is left alone."""
    out: list[str] = []
    quote: str | None = None
    for char in sql:
        if quote is not None:
            out.append("%%" if char == "%" else char)
            if char == quote:
                quote = None
        elif char in ("'", '"'):
            quote = char
            out.append(char)
        elif char == "?":
            out.append("%s")
        elif char == "%":
            out.append("%%")
        else:
            out.append(char)
    return "".join(out)


class PgRow:
    """A result row by column name or position, like `sqlite3.Row`."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = tuple(values)
        self._index = index

    def __getitem__(self, key: Any, /) -> Any:
        if isinstance(key, str):
            return self._values[self._index[key]]
        return self._values[key]

    def keys(self) -> list[str]:
        return list(self._index)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PgRow):
            return self._values == other._values
        if isinstance(other, tuple):
            return self._values == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values)

    def __repr__(self) -> str:
        return f"PgRow({dict(zip(self._index, self._values, strict=True))!r})"


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], PgRow]:
    names = [column.name for column in cursor.description or ()]
    index = {name: position for position, name in enumerate(names)}
    return lambda values: PgRow(values, index)


class _Result:
    """A statement's outcome, read out before its connection goes back to the pool."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rowcount: int, rows: list[PgRow]) -> None:
        self.rowcount = rowcount
        self._rows = rows

    def fetchone(self) -> PgRow | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[PgRow]:
        return list(self._rows)


def _run(conn: psycopg.Connection[Any], sql: str, params: Params) -> _Result:
    cur = conn.execute(translate(sql), tuple(params))
    rows = cur.fetchall() if cur.description is not None else []
    return _Result(cur.rowcount, rows)


def _locked(conn: psycopg.Connection[Any]) -> bool:
    row = _run(conn, "SELECT pg_try_advisory_lock(?)", (LOCK_KEY,)).fetchone()
    return bool(row is not None and row[0])


def _pause(seconds: float) -> None:
    time.sleep(seconds)


def until_locked(attempt: Callable[[], bool]) -> None:
    """Call `attempt` (a try of `LOCK_KEY`) until it succeeds, pausing 10 ms..0.5 s between.

    Never waiting for `LOCK_KEY` inside a statement: `CREATE INDEX CONCURRENTLY`
    (LangGraph's checkpoint setup, run while a session holds the lock) waits for
    every transaction with an older snapshot, and a statement blocked on the lock
    would be one of them, so each would wait for the other for ever.
    """
    delay = 0.01
    while not attempt():
        _pause(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, 0.5)


def _sqlstate(exc: BaseException) -> str | None:
    return getattr(exc, "sqlstate", None)


class PostgresLedger:
    """The ledger in one PostgreSQL database (schema `current_schema()`); safe to share."""

    def __init__(
        self,
        url: str,
        *,
        readonly: bool = False,
        pool_size: int = POOL_SIZE,
        search_path: str | None = None,
        files_dir: Path | None = None,
    ) -> None:
        import psycopg
        from psycopg_pool import ConnectionPool

        self._url = url
        self._where = redact_url(url)
        self._readonly = readonly
        self._files_dir = (files_dir or Path.cwd()).resolve()
        options = []
        if readonly:
            options.append("-c default_transaction_read_only=on")
        if search_path is not None:
            options.append(f"-c search_path={search_path}")
        # TCP keepalives too, so even a connection that waits on the server notices a dead peer.
        self._kwargs: dict[str, Any] = {
            "connect_timeout": CONNECT_TIMEOUT_S,
            "keepalives": 1,
            "keepalives_idle": 30,
            "keepalives_interval": 10,
            "keepalives_count": 3,
        }
        if options:
            self._kwargs["options"] = " ".join(options)
        try:  # one direct connection first: a pool would only say "timed out", not why
            psycopg.connect(url, **self._kwargs).close()
        except psycopg.Error as exc:
            raise DatabaseUnreachableError(
                f"{DATABASE_URL_VARIABLE}: cannot connect to {self._where}: "
                f"{self._scrub(exc)}; check the host, port, user, password and database name"
            ) from None
        except Exception as exc:  # a malformed conninfo is a ProgrammingError / ValueError
            raise DatabaseUnreachableError(
                f"{DATABASE_URL_VARIABLE}: {self._where} is not a usable PostgreSQL URL: "
                f"{self._scrub(exc)}"
            ) from None
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={**self._kwargs, "autocommit": True, "row_factory": _row_factory},
            open=False,
            timeout=POOL_WAIT_S,
            name="agent-team-ledger",
        )
        self.write_health = WriteHealth()
        self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        self._saver: FencedPostgresSaver | None = None
        self._saver_pool: ConnectionPool[Any] | None = None
        self._saver_guard = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresLedger({self._where!r}{', readonly=True' if self._readonly else ''})"

    def _scrub(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split())
        secret = password_of(self._url)
        return text.replace(secret, "***") if secret else text

    def _storage_error(self, exc: BaseException) -> LedgerStorageError:
        import psycopg

        if isinstance(exc, psycopg.IntegrityError):
            return LedgerIntegrityError(
                f"the ledger {self._where} refused a row: {self._scrub(exc)}"
            )
        return LedgerStorageError(
            f"the ledger {self._where} failed: {self._scrub(exc)}; "
            "check it with `agent-team doctor`"
        )

    # -- what callers may ask -------------------------------------------------------------

    @property
    def dialect(self) -> Dialect:
        return POSTGRES

    @property
    def location(self) -> str:
        return self._where

    @property
    def files_dir(self) -> Path | None:
        return self._files_dir

    @property
    def readonly(self) -> bool:
        return self._readonly

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled autocommit connection, for the schema code inside `db/`."""
        import psycopg
        from psycopg_pool import PoolTimeout

        if self._closed:
            raise LedgerError(f"the ledger {self._where} was closed")
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise LedgerBusyError(
                f"no connection to the ledger {self._where} came free: {exc}"
            ) from None
        except psycopg.Error as exc:
            raise self._storage_error(exc) from exc

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        with self.connection() as conn:
            return list(_run(conn, sql, params).fetchall())

    def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.fetch_all(sql, params)
        return rows[0] if rows else None

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        with self.connection() as conn:
            return _run(conn, sql, params)

    def write(self, work: Callable[[Transaction], _T], *, flush: bool = True) -> _T:
        """Run `work` in one SERIALIZABLE transaction, re-running it when PostgreSQL asks to.

        `work` must be safe to re-run from the start (as on SQLite). `flush=False`
        (see `Ledger.write`) is `SET LOCAL synchronous_commit = off`: the server
        flushes its WAL in order, so the next synchronous commit covers this one.
        """
        # A refused row, a fence or a bug in `work` is not the database refusing writes.
        return self.write_health.record(lambda: self._write(work, flush=flush), refused_by_database)

    def _write(self, work: Callable[[Transaction], _T], *, flush: bool) -> _T:
        import psycopg

        if self._readonly:
            raise LedgerError(f"the ledger {self._where} was opened read-only; nothing was written")
        last: BaseException | None = None
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with self.connection() as conn:
                    conn.execute(POSTGRES.begin_write)
                    try:
                        if not flush:
                            conn.execute("SET LOCAL synchronous_commit = off")
                        tx = _Tx(conn, self)
                        check_fence(tx, lock=POSTGRES.share_lock)
                        result = work(tx)
                        conn.execute("COMMIT")
                    except BaseException:
                        if not conn.closed and conn.info.transaction_status != 0:  # not IDLE
                            conn.execute("ROLLBACK")
                        raise
                return result
            except LedgerStorageError as exc:
                cause = exc.__cause__
                if not isinstance(cause, psycopg.Error) or _sqlstate(cause) not in _RETRY_SQLSTATES:
                    raise
                last = cause
            except psycopg.Error as exc:
                if _sqlstate(exc) not in _RETRY_SQLSTATES:
                    raise self._storage_error(exc) from exc
                last = exc
            log.debug("ledger write not serialisable (attempt %d of %d)", attempt, WRITE_ATTEMPTS)
            time.sleep(min(0.005 * 2**attempt, 0.5) * random.uniform(0.5, 1.5))
        raise LedgerBusyError(
            f"the ledger {self._where} could not serialise a write through {WRITE_ATTEMPTS} "
            f"attempts ({self._scrub(last) if last else 'conflicts'}); too many writers on one row?"
        )

    def write_together(self, work: Callable[[Transaction], _T]) -> _T:
        """`write`: PostgreSQL already flushes the WAL of commits that arrive together once,
        and its sessions commit in parallel."""
        return self.write(work)

    @contextmanager
    def snapshot(self) -> Iterator[_Snapshot]:
        """Several reads that see one state: a REPEATABLE READ, READ ONLY transaction."""
        with self.connection() as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield _Snapshot(conn, self)
            finally:
                if not conn.closed and conn.info.transaction_status != 0:
                    conn.execute("ROLLBACK")  # nothing was written; this only ends the snapshot

    def checkpointer(self, *, flush_only: Collection[str] | None = None) -> FencedPostgresSaver:
        """LangGraph's `PostgresSaver` on a pool of its own, set up once under our advisory lock.

        The saver needs autocommit connections returning dicts, with statements
        prepared at once (`prepare_threshold=0`, as its own `from_conn_string`
        makes them). Its `setup()` creates indexes `CONCURRENTLY`, which cannot
        run in a transaction, and takes no lock of its own: so it runs in
        autocommit while another session holds `LOCK_KEY`, and daemons booting
        together on an empty database set it up once.
        """
        if self._readonly:
            raise LedgerError(
                f"the ledger {self._where} was opened read-only; it keeps no checkpoints"
            )
        import psycopg
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        from agent_team.db.fenced_postgres_saver import FencedPostgresSaver

        with self._saver_guard:
            if self._saver is None:
                pool: ConnectionPool[Any] = ConnectionPool(
                    self._url,
                    min_size=1,
                    max_size=SAVER_POOL_SIZE,
                    kwargs={
                        **self._kwargs,
                        "autocommit": True,
                        "row_factory": dict_row,
                        "prepare_threshold": 0,
                    },
                    open=False,
                    timeout=POOL_WAIT_S,
                    name="agent-team-checkpoints",
                )
                try:
                    pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
                    saver = FencedPostgresSaver(pool)
                    saver.fence_reader = self
                    if flush_only is not None:
                        saver.flush.flush_only(flush_only)
                    if not self.checkpoints_current(len(saver.MIGRATIONS) - 1):
                        with self._session_lock():
                            saver.setup()
                except psycopg.Error as exc:
                    pool.close()
                    raise self._storage_error(exc) from exc
                except BaseException:
                    pool.close()
                    raise
                self._saver_pool, self._saver = pool, saver
            self._saver.flush.require(flush_only)
            return self._saver

    def checkpoints_current(self, latest: int) -> bool:
        """Whether LangGraph's checkpoint tables are already at its newest migration."""
        with self.connection() as conn:
            found = _run(conn, "SELECT to_regclass('checkpoint_migrations')", ()).fetchone()
            if found is None or found[0] is None:
                return False
            row = _run(conn, "SELECT max(v) FROM checkpoint_migrations", ()).fetchone()
            return row is not None and row[0] is not None and int(row[0]) >= latest

    @contextmanager
    def _session_lock(self) -> Iterator[None]:
        """`LOCK_KEY` held by a session of its own (see `until_locked`: two savers
        setting up at once must not wait on each other for ever)."""
        with self.connection() as conn:
            until_locked(lambda: _locked(conn))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))

    def listen_for_commands(
        self,
        on_wake: Callable[[], None],
        stop: threading.Event,
        *,
        beat: Callable[[], None] | None = None,
    ) -> None:
        """`LISTEN` on a connection of its own (a pooled one would be handed to others).

        A lost connection is opened again with back-off (0.1 s doubling to 5 s);
        meanwhile the worker's poll finds what is queued, and after each
        reconnect `on_wake` is called once for what came in while away.
        """
        import psycopg

        delay = 0.1
        while not stop.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True, **self._kwargs) as conn:
                    conn.execute(f"LISTEN {COMMANDS_CHANNEL}")
                    on_wake()
                    delay = 0.1
                    pinged = time.monotonic()
                    while not stop.is_set():
                        for _ in conn.notifies(timeout=LISTEN_IDLE_S):
                            on_wake()
                            if stop.is_set():
                                break
                        if time.monotonic() - pinged > LISTEN_PING_S:
                            conn.execute("SELECT 1")  # a dead connection raises here
                            pinged = time.monotonic()
                        if beat is not None:
                            beat()
            except psycopg.Error as exc:
                if stop.is_set() or self._closed:
                    return
                log.warning(
                    "command wake-ups from %s lost (%s); polling until reconnected in %.1f s",
                    self._where,
                    self._scrub(exc),
                    delay,
                )
                if beat is not None:
                    beat()
                stop.wait(delay)
                delay = min(delay * 2, LISTEN_RECONNECT_MAX_S)

    def close(self) -> None:
        self._closed = True
        with self._saver_guard:
            if self._saver_pool is not None:
                self._saver_pool.close()
                self._saver_pool = self._saver = None
        self._pool.close()

    def __enter__(self) -> PostgresLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Tx:
    """A write transaction's handle; driver errors become `LedgerError`s (kept as the cause)."""

    __slots__ = ("_conn", "_ledger")

    def __init__(self, conn: psycopg.Connection[Any], ledger: PostgresLedger) -> None:
        self._conn = conn
        self._ledger = ledger

    @property
    def dialect(self) -> Dialect:
        """So code handed a transaction or a snapshot can ask which SQL it speaks."""
        return POSTGRES

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        import psycopg

        try:
            return _run(self._conn, sql, params)
        except psycopg.Error as exc:
            raise self._ledger._storage_error(exc) from exc

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        return list(self.execute(sql, params).fetchall())

    def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.fetch_all(sql, params)
        return rows[0] if rows else None


class _Snapshot(_Tx):
    """Reads inside one REPEATABLE READ transaction on a connection of its own."""

    __slots__ = ()
