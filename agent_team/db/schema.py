"""The migration that walks the ledger's schema, version by version, on either backend.

The statements live in `schema_steps` (shared with `schema_postgres`); this module
applies them to SQLite, checks a ledger is ready, dumps `schema.sql`, and hands a
PostgreSQL URL to `schema_postgres`.

Each step runs in its own `BEGIN IMMEDIATE` transaction and re-reads the
version inside it, so two processes starting at once cannot both apply a step,
and a crash mid-step leaves the ledger at the previous version.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Protocol

from agent_team.db.ledger import Cursor, Params, Reader, Row
from agent_team.db.open_errors import explain
from agent_team.db.schema_postgres import (
    assert_ready_url,
    init_postgres,
    postgres_version,
)
from agent_team.db.schema_postgres import dump_fresh_postgres_schema as _dump_postgres
from agent_team.db.schema_steps import (
    _FOREIGN_KEYS_OFF,
    _STEPS,
    LEDGER_TABLES,
    REQUIRED_COLUMNS,
    SCHEMA_VERSION,
    _refuse_newer,
)
from agent_team.db.sqlite_ledger import SqliteLedger, storage_error
from agent_team.db.url import is_postgres_url
from agent_team.exceptions import LedgerError, LedgerNotReadyError

__all__ = [
    "LEDGER_TABLES",
    "REQUIRED_COLUMNS",
    "SCHEMA_VERSION",
    "assert_ready",
    "dump_fresh_postgres_schema",
    "dump_schema",
    "init_db",
    "migrate",
    "schema_version",
]


class _Executes(Protocol):
    """A ledger or a bare sqlite3 connection (the migration tests hold those)."""

    def execute(self, sql: str, params: Params = (), /) -> Cursor: ...


def schema_version(conn: Reader | _Executes) -> int:
    """The ledger's version; 0 for an empty file (a ledger, a snapshot, or a bare connection)."""
    dialect = getattr(conn, "dialect", None)
    if dialect is not None and dialect.name != "sqlite":
        return postgres_version(conn)  # type: ignore[arg-type]
    if not hasattr(conn, "fetch_one"):
        conn = _RawReader(conn)
    has_meta = conn.fetch_one(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_meta'"
    )
    if not has_meta:
        return 0
    row = conn.fetch_one("SELECT schema_version FROM schema_meta WHERE id = 1")
    return int(row[0]) if row else 0


class _RawReader:
    """A bare sqlite3 connection seen as a `Reader` (migrations run on one)."""

    def __init__(self, conn: _Executes) -> None:
        self._conn = conn

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        return list(self._conn.execute(sql, params).fetchall())

    def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.fetch_all(sql, params)
        return rows[0] if rows else None


def _apply_step(conn: sqlite3.Connection, version: int, statements: tuple[str, ...]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        if schema_version(conn) >= version:  # another process got here first
            conn.execute("ROLLBACK")
            return
        for statement in statements:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_meta (id, schema_version) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET schema_version = excluded.schema_version",
            (version,),
        )
        problems = conn.execute("PRAGMA foreign_key_check").fetchall()
        if problems:
            raise LedgerError(
                f"migration to v{version} broke foreign keys ({problems[:3]}); restore a backup"
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def migrate(conn: sqlite3.Connection, *, target: int = SCHEMA_VERSION) -> int:
    """Step the ledger forward to `target`, one version per transaction.

    Idempotent: a ledger already at `target` is left alone. The connection must
    be in autocommit mode (as `connect()` makes it).

    Returns:
        The version the ledger is at afterwards.

    Raises:
        SchemaTooNewError: the ledger is newer than this code.
    """
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        row = conn.execute("PRAGMA database_list").fetchone()
        _refuse_newer(current, f"at {row[2]}" if row and row[2] else "in memory")
    for version in range(current + 1, target + 1):
        statements = _STEPS[version]
        if version in _FOREIGN_KEYS_OFF:
            # Only effective outside a transaction, hence around _apply_step.
            conn.execute("PRAGMA foreign_keys = OFF")
            try:
                _apply_step(conn, version, statements)
            finally:
                conn.execute("PRAGMA foreign_keys = ON")
        else:
            _apply_step(conn, version, statements)
    if target > current:
        _give_back_free_pages(conn)
    return schema_version(conn)


def _give_back_free_pages(conn: sqlite3.Connection) -> None:
    """Return the pages a step freed (v11 drops indexes) on a file in incremental mode.

    So a new ledger starts with no free pages, and an upgraded one does not keep
    a dropped index's room for ever (the retention pass reclaims only what it frees).
    """
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # 2: INCREMENTAL
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()
        # One page per step, and Python's sqlite3 stops at the pragma's first (empty) row.
        for _ in range(int(free)):
            conn.execute("PRAGMA incremental_vacuum")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def init_db(path: str | Path) -> int:
    """Create or upgrade the ledger at `path` (or a PostgreSQL URL); safe on every start-up.

    Returns:
        The schema version, always `SCHEMA_VERSION` on success.
    """
    if is_postgres_url(path):
        return init_postgres(str(path))
    with SqliteLedger(path) as ledger:
        try:
            return migrate(ledger.raw())
        except sqlite3.Error as exc:
            raise storage_error(exc, ledger.path) from exc


def assert_ready(path: str | Path) -> None:
    """Fail loudly unless the ledger has every table and column the app needs.

    Opens the file read-only, so it never creates or changes anything.

    Raises:
        LedgerNotReadyError: missing file, table or column, or an old version.
        SchemaTooNewError: the ledger is newer than this code.
    """
    if is_postgres_url(path):
        return assert_ready_url(str(path))
    file = Path(path)
    if not file.is_file():
        where = file.resolve()
        raise LedgerNotReadyError(
            f"no ledger at {where}; if yours is elsewhere, point to it with --db PATH or "
            "AGENT_TEAM_DB_PATH (a relative path is read from the working folder); to start "
            f"a new, empty one, run `agent-team migrate --db {where}`"
        )
    conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
    try:
        try:
            version = schema_version(conn)
        except sqlite3.Error as exc:
            # A folder we cannot write, a lock or real damage first; only then blame the table.
            explained = explain(exc, file.resolve())
            if explained is not None:
                raise explained from None
            if isinstance(exc, sqlite3.OperationalError) and "no such" in str(exc):
                raise LedgerNotReadyError(
                    f"the ledger at {file} has a damaged schema_meta table ({exc}); "
                    "restore a backup"
                ) from None
            raise storage_error(exc, file.resolve()) from None
        _refuse_newer(version, f"at {file}")
        if version < SCHEMA_VERSION:
            raise LedgerNotReadyError(
                f"the ledger at {file} is at schema version {version}, the app needs "
                f"{SCHEMA_VERSION}; run `agent-team migrate --db {file}`"
            )
        for table, columns in REQUIRED_COLUMNS.items():
            present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            if not present:
                raise LedgerNotReadyError(
                    f"the ledger at {file} has no table {table!r}; "
                    f"run `agent-team migrate --db {file}` or restore a backup"
                )
            missing = [column for column in columns if column not in present]
            if missing:
                raise LedgerNotReadyError(
                    f"table {table!r} in {file} lacks column(s) {', '.join(missing)}; "
                    f"run `agent-team migrate --db {file}` or restore a backup"
                )
    finally:
        conn.close()


def dump_fresh_postgres_schema(url: str | Path) -> str:
    """What the migrations make on an empty PostgreSQL database (`schema.postgres.sql`)."""
    if not is_postgres_url(url):
        raise LedgerError(
            "the PostgreSQL schema is dumped from a server: set AGENT_TEAM_DATABASE_URL to a "
            "postgresql:// URL (a scratch schema is made there and dropped)"
        )
    return _dump_postgres(str(url))


def dump_schema(conn: _Executes | None = None) -> str:
    """The DDL of our tables and indexes, as `schema.sql` holds it.

    With no connection, a throwaway in-memory ledger is migrated from empty,
    which is exactly what `init_db` does to a new file.
    """
    scratch = sqlite3.connect(":memory:", isolation_level=None) if conn is None else None
    try:
        db: _Executes
        if scratch is not None:
            migrate(scratch)
            db = scratch
        else:
            assert conn is not None
            db = conn
        version = schema_version(db)
        placeholders = ", ".join("?" for _ in LEDGER_TABLES)
        rows = db.execute(
            f"SELECT type, name, sql FROM sqlite_master WHERE tbl_name IN ({placeholders}) "
            "AND sql IS NOT NULL ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, tbl_name, name",
            LEDGER_TABLES,
        ).fetchall()
    finally:
        if scratch is not None:
            scratch.close()
    lines = [
        "-- agent-team ledger schema (generated by `agent-team schema`; do not edit by hand)",
        f"-- schema_version {version}",
        "",
    ]
    lines.extend(f"{sql};\n" for _type, _name, sql in rows)
    return "\n".join(lines)
