"""Copy a SQLite ledger into a PostgreSQL one (`agent-team migrate-to-postgres`), and back.

The way back (`--reverse`, `transfer_to_sqlite`) is narrower: see its docstring.

What is copied, and why:

- Every ledger table in `LEDGER_TABLES` except the runtime-only ones
  (`RUNTIME_ONLY`: `leases`, held by running processes, and `schema_meta`,
  which the target keeps for itself), so a table added by a later version is
  copied without touching this module. Columns are matched by name; ids
  (`transition_id`, `entry_id`) are copied as they are, and SQLite's implicit
  `rowid` goes into the explicit `rowid` column PostgreSQL has for the tables
  that order by it, so "oldest first" stays the same. The identity sequences
  are then set past the largest copied id, so the next row does not collide.
- A command the stopped daemon still had claimed is copied as pending (the
  claim of a dead process, as the recovery sweep releases it on one host),
  so the first daemon on PostgreSQL runs it at once instead of waiting out
  the lease.
- For each live task (not done, failed or cancelled), its latest LangGraph
  checkpoint in every namespace (subgraphs have their own), with its pending
  writes: an interrupted gate keeps its interrupt, a run cut short continues.
  Finished tasks' checkpoints stay behind: `show` and the dashboard read our
  own tables only.

Safety:

- The source must be at exactly this version's schema: an older file is
  refused (run `agent-team migrate --db FILE` first: upgrading is a change to
  the file the operator should make knowingly, and this command never writes
  the file), a newer one too (never downgrade). The target is migrated first.
- The daemon's lock on the file is taken for the whole copy, so no daemon runs
  on the file meanwhile; a daemon already running is named and refused.
- The ledger rows go in ONE transaction, after the checkpoints: a failure
  leaves the target's tables as they were (at most, checkpoints of threads
  with no task yet, which nothing runs); a target that shows a task also holds
  its checkpoint. Each checkpoint's writes go in before the checkpoint itself,
  so a copy cut short between them is redone on the next run.
- Idempotent: rows are inserted `ON CONFLICT (primary key) DO NOTHING` and a
  checkpoint the target already holds (or a newer one) is skipped, so a second
  run copies nothing and says so. It is meant for re-running after a failure,
  not for syncing a file into a database daemons already work on.
- The URL's password never reaches a message (`redact_url`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_team.db.clock import from_iso, utc_now
from agent_team.db.daemon_lock import DaemonLock, claim_daemon_slot, daemon_holder
from agent_team.db.ledger import Reader, Transaction
from agent_team.db.schema import assert_ready, init_db, schema_version
from agent_team.db.schema_steps import LEDGER_TABLES, SCHEMA_VERSION, _refuse_newer
from agent_team.db.sqlite_ledger import BUSY_TIMEOUT_S, SqliteLedger
from agent_team.db.url import DATABASE_URL_VARIABLE, is_postgres_url, parse_target, redact_url
from agent_team.exceptions import (
    ConfigError,
    DatabaseUnreachableError,
    LedgerError,
    LedgerInUseError,
    LedgerStorageError,
    LedgerUnavailableError,
)
from agent_team.task_model import TERMINAL_STATUSES

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
    from langgraph.checkpoint.sqlite import SqliteSaver

    from agent_team.db.postgres_ledger import PostgresLedger

__all__ = [
    "RUNTIME_ONLY",
    "TableCopy",
    "TransferReport",
    "copied_tables",
    "transfer_to_postgres",
    "transfer_to_sqlite",
]

RUNTIME_ONLY = frozenset({"leases", "schema_meta"})
_ROWS_PER_STATEMENT = 2000
_TERMINAL = tuple(sorted(status.value for status in TERMINAL_STATUSES))


def copied_tables() -> tuple[str, ...]:
    """The ledger tables a transfer copies, in schema order."""
    return tuple(table for table in LEDGER_TABLES if table not in RUNTIME_ONLY)


@dataclass(frozen=True, slots=True)
class TableCopy:
    """One table: rows in the file, and how many of them were (or would be) inserted.

    `copied` is None on a dry run against a target not yet at this schema
    (nothing there can be compared before it is migrated).
    """

    table: str
    source_rows: int
    copied: int | None

    @property
    def already_there(self) -> int | None:
        return None if self.copied is None else self.source_rows - self.copied


@dataclass(frozen=True, slots=True)
class TransferReport:
    """What a transfer did (or, with `dry_run`, would do)."""

    source: str
    target: str
    source_version: int
    target_before: int
    target_after: int
    dry_run: bool
    tables: tuple[TableCopy, ...]
    live_tasks: int
    checkpoints_copied: int
    checkpoints_present: int
    released_claims: int
    sequences: dict[str, int] = field(default_factory=dict)
    reverse: bool = False

    @property
    def rows_copied(self) -> int:
        return sum(t.copied or 0 for t in self.tables)

    @property
    def rows_in_source(self) -> int:
        return sum(t.source_rows for t in self.tables)


class _DryRun(Exception):
    """Raised inside the copy transaction to roll it back with its counts."""

    def __init__(self, tables: list[TableCopy]) -> None:
        super().__init__("dry run")
        self.tables = tables


def _renamed(exc: ConfigError, named: str) -> ConfigError:
    """The URL error naming the option the operator used instead of the variable."""
    text = str(exc)
    if named != DATABASE_URL_VARIABLE:
        text = text.replace(DATABASE_URL_VARIABLE, named)
    return type(exc)(text)


def _check_url(url: str, named: str) -> None:
    if not is_postgres_url(url):
        raise ConfigError(
            f"{named}: {redact_url(url)} is not a PostgreSQL URL; "
            "use postgresql://user@host:5432/dbname"
        )
    try:
        parse_target(url)
    except ConfigError as exc:
        raise _renamed(exc, named) from None


def _file_of(value: str | Path) -> Path:
    where = parse_target(value)
    if where.path is None:
        raise ConfigError(
            f"--from {redact_url(str(value))}: --from is the SQLite file "
            "(e.g. --from /var/lib/agent-team/agent-team.db)"
        )
    return where.path


def _source_file(source: str | Path) -> Path:
    path = _file_of(source)
    if not path.is_file():
        raise ConfigError(f"--from {path}: no such file; give the SQLite ledger's path")
    return path


def _hold_the_file(path: Path, *, dry_run: bool) -> DaemonLock | None:
    """The daemon's lock on the file for the whole copy; a running daemon is named and refused."""

    def refuse(describe: str) -> LedgerInUseError:
        return LedgerInUseError(
            f"an agent-team daemon ({describe}) runs on {path}; stop it first "
            "(e.g. `systemctl stop agent-team`), then run migrate-to-postgres again"
        )

    if dry_run and not path.exists():
        return None

    if dry_run:  # writes nothing, not even the lock file
        holder = daemon_holder(path)
        if holder is not None:
            raise refuse(holder.describe())
        return None
    try:
        return claim_daemon_slot(path, url="agent-team migrate-to-postgres")
    except LedgerInUseError:
        holder = daemon_holder(path)
        raise refuse(holder.describe() if holder else "pid unknown") from None
    except LedgerUnavailableError:
        # A folder nobody can write: no daemon can write the file either.
        return None


def transfer_to_postgres(
    source: str | Path,
    url: str,
    *,
    dry_run: bool = False,
    named: str = DATABASE_URL_VARIABLE,
) -> TransferReport:
    """Copy the SQLite ledger at `source` into the PostgreSQL database at `url`.

    See the module docstring for what is copied and the guarantees.

    Args:
        dry_run: check and count everything, write nothing (the target is not
            migrated; the row counts come from a copy transaction rolled back).
        named: how the URL was given (`--to`), for the messages.

    Raises:
        ConfigError: a bad source path or URL, or an unreachable server
            (`DatabaseUnreachableError`); never with the password.
        LedgerInUseError: a daemon runs on the file.
        LedgerNotReadyError: the file's schema is older than this version's.
        SchemaTooNewError: the file or the database is newer than this version.
        LedgerError: the copy failed; the target's tables are as they were.
    """
    from agent_team.db.postgres_ledger import PostgresLedger
    from agent_team.db.schema_postgres import migrate_postgres, postgres_version

    _check_url(url, named)
    path = _source_file(source)
    lock = _hold_the_file(path, dry_run=dry_run)
    try:
        assert_ready(path)  # exactly our schema: older or newer is refused with what to do
        try:
            target = PostgresLedger(url, pool_size=2)
        except DatabaseUnreachableError as exc:
            raise _renamed(exc, named) from None
        with target, SqliteLedger(path, readonly=True) as file:
            before = postgres_version(target)
            _refuse_newer(before, target.location)
            after = before if dry_run else migrate_postgres(target)
            current = after == SCHEMA_VERSION
            with file.snapshot() as view:
                live = _live_tasks(view)
                copied, present = _copy_checkpoints(path, live, target, dry_run=dry_run)
                tables, sequences = _copy_tables(view, target, dry_run=dry_run, compare=current)
                released = _claimed_commands(view)
        return TransferReport(
            source=str(path.resolve()),
            target=redact_url(url),
            source_version=SCHEMA_VERSION,
            target_before=before,
            target_after=after,
            dry_run=dry_run,
            tables=tuple(tables),
            live_tasks=len(live),
            checkpoints_copied=copied,
            checkpoints_present=present,
            released_claims=released,
            sequences=sequences,
        )
    finally:
        if lock is not None:
            lock.release()


# -- the ledger tables --------------------------------------------------------------------------


def _live_tasks(view: Reader) -> list[str]:
    marks = ", ".join("?" for _ in _TERMINAL)
    rows = view.fetch_all(
        f"SELECT id FROM tasks WHERE status NOT IN ({marks}) ORDER BY rowid", _TERMINAL
    )
    return [str(row["id"]) for row in rows]


def _claimed_commands(view: Reader) -> int:
    row = view.fetch_one("SELECT count(*) AS n FROM commands WHERE state = 'claimed'")
    return int(row["n"]) if row else 0


def _source_columns(view: Reader, table: str) -> list[str]:
    return [
        str(row["name"]) for row in view.fetch_all(f"SELECT name FROM pragma_table_info('{table}')")
    ]


def _target_columns(target: PostgresLedger) -> dict[str, list[str]]:
    rows = target.fetch_all(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
    )
    columns: dict[str, list[str]] = {}
    for row in rows:
        columns.setdefault(str(row["table_name"]), []).append(str(row["column_name"]))
    return columns


def _primary_key(target: PostgresLedger, table: str) -> list[str]:
    rows = target.fetch_all(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
        "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = to_regclass(?) AND i.indisprimary ORDER BY a.attnum",
        (table,),
    )
    return [str(row["attname"]) for row in rows]


def _identity_columns(target: PostgresLedger, tables: Sequence[str]) -> list[tuple[str, str]]:
    rows = target.fetch_all(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND is_identity = 'YES' "
        "ORDER BY table_name, column_name"
    )
    return [
        (str(r["table_name"]), str(r["column_name"])) for r in rows if r["table_name"] in tables
    ]


def _select(table: str, columns: list[str]) -> str:
    """One page of the source, in rowid order after a given rowid (the key is the last value).

    A claimed command is read back as pending: its claimer is the stopped daemon.
    """
    released = {
        "state": "CASE WHEN state = 'claimed' THEN 'pending' ELSE state END",
        "claimed_by": "CASE WHEN state = 'claimed' THEN NULL ELSE claimed_by END",
        "lease_until": "CASE WHEN state = 'claimed' THEN NULL ELSE lease_until END",
    }
    exprs = [released[c] if table == "commands" and c in released else c for c in columns]
    return f"SELECT {', '.join(exprs)}, rowid FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?"


@dataclass(frozen=True, slots=True)
class _Plan:
    """How one table is copied: the columns (by name), the source page, the INSERT's head."""

    table: str
    columns: list[str]
    select: str
    insert: str


def _plans(view: Reader, target: PostgresLedger) -> list[_Plan]:
    there = _target_columns(target)
    plans = []
    for table in copied_tables():
        columns = _source_columns(view, table)
        wanted = there.get(table, [])
        missing = [c for c in columns if c not in wanted]
        if not wanted or missing:
            raise LedgerError(
                f"the target {target.location} lacks table {table!r} or its column(s) "
                f"{', '.join(missing)}; run `agent-team migrate` on it and try again"
            )
        # SQLite's implicit rowid, made an explicit column on PostgreSQL (schema_postgres).
        if "rowid" in wanted and "rowid" not in columns:
            columns = [*columns, "rowid"]
        key = ", ".join(_primary_key(target, table))
        names = ", ".join(columns)
        plans.append(
            _Plan(
                table=table,
                columns=columns,
                select=_select(table, columns),
                insert=(
                    f"INSERT INTO {table} ({names}) SELECT {names} "
                    f"FROM jsonb_populate_recordset(NULL::{table}, ?::jsonb) "
                    f"ON CONFLICT ({key}) DO NOTHING"
                ),
            )
        )
    return plans


def _copy_table(tx: Transaction, view: Reader, plan: _Plan) -> TableCopy:
    """Page through the source table and insert each page with one statement.

    A page travels as one JSON parameter that `jsonb_populate_recordset` turns
    into rows of the table's own types: the statement text stays the same for
    every page (a multi-row VALUES list with thousands of placeholders costs the
    driver more to parse than the server to insert). Pages keep memory flat on
    a large ledger; the source is one snapshot, so re-running this (a retried
    transaction) reads the same pages.
    """
    width = len(plan.columns)
    after: int = -(2**63)
    total = inserted = 0
    while True:
        rows = view.fetch_all(plan.select, (after, _ROWS_PER_STATEMENT))
        if not rows:
            break
        page = [{column: row[i] for i, column in enumerate(plan.columns)} for row in rows]
        inserted += tx.execute(plan.insert, (json.dumps(page, ensure_ascii=False),)).rowcount
        total += len(rows)
        after = int(rows[-1][width])
        if len(rows) < _ROWS_PER_STATEMENT:
            break
    return TableCopy(plan.table, total, inserted)


def _set_sequences(tx: Transaction, identities: list[tuple[str, str]]) -> dict[str, int]:
    """Each identity sequence past the largest id now in its table (never moved back)."""
    moved: dict[str, int] = {}
    for table, column in identities:
        row = tx.fetch_one(
            f"SELECT setval(pg_get_serial_sequence(?, ?)::regclass, top) AS value "
            f"FROM (SELECT max({column}) AS top FROM {table}) AS copied WHERE top IS NOT NULL "
            "AND top > COALESCE(pg_sequence_last_value(pg_get_serial_sequence(?, ?)::regclass), 0)",
            (table, column, table, column),
        )
        if row is not None:
            moved[f"{table}.{column}"] = int(row["value"])
    return moved


def _copy_tables(
    view: Reader, target: PostgresLedger, *, dry_run: bool, compare: bool
) -> tuple[list[TableCopy], dict[str, int]]:
    if not compare:  # a dry run on a target not yet at this schema: only the file's counts
        counts = []
        for table in copied_tables():
            row = view.fetch_one(f"SELECT count(*) AS n FROM {table}")
            counts.append(TableCopy(table, int(row["n"]) if row else 0, None))
        return counts, {}
    plans = _plans(view, target)
    identities = _identity_columns(target, [plan.table for plan in plans])
    at = [""]

    def work(tx: Transaction) -> tuple[list[TableCopy], dict[str, int]]:
        copies = []
        for plan in plans:
            at[0] = plan.table
            copies.append(_copy_table(tx, view, plan))
        at[0] = ""
        if dry_run:
            raise _DryRun(copies)
        return copies, _set_sequences(tx, identities)

    try:
        return target.write(work)
    except _DryRun as done:
        return done.tables, {}
    except LedgerStorageError as exc:
        where = f"copying table {at[0]!r}" if at[0] else "setting the id sequences"
        raise type(exc)(
            f"{where} failed, so no row was copied (one transaction): {exc}; "
            "fix the cause and run migrate-to-postgres again"
        ) from exc


# -- the checkpoints of live tasks --------------------------------------------------------------


def _reader(path: Path) -> SqliteSaver | None:
    """A `SqliteSaver` on a read-only connection to the file; None if it holds no checkpoints."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(
        f"{path.resolve().as_uri()}?mode=ro",
        uri=True,
        timeout=BUSY_TIMEOUT_S,
        check_same_thread=False,
    )
    found = conn.execute(
        "SELECT count(*) FROM sqlite_master "
        "WHERE type = 'table' AND name IN ('checkpoints', 'writes')"
    ).fetchone()
    if not found or found[0] < 2:
        conn.close()
        return None
    saver = SqliteSaver(conn)
    saver.setup()  # creates nothing here; learns whether `writes` has `task_path` (read-only aware)
    return saver


def _namespaces(saver: SqliteSaver, thread_id: str) -> list[str]:
    # DISTINCT here instead of `saver.list`: that would load every checkpoint of the thread.
    rows = saver.conn.execute(
        "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_ns",
        (thread_id,),
    ).fetchall()
    return [str(ns) for (ns,) in rows]


def _task_paths(saver: SqliteSaver, thread_id: str, ns: str, checkpoint_id: str) -> dict[str, str]:
    """The `task_path` of each pending write's task (`get_tuple` drops it; ordering needs it)."""
    if not saver._has_task_path:
        return {}
    rows = saver.conn.execute(
        "SELECT DISTINCT task_id, task_path FROM writes "
        "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
        (thread_id, ns, checkpoint_id),
    ).fetchall()
    return {str(task_id): str(path) for task_id, path in rows}


def _target_latest(target: PostgresLedger, thread_id: str, ns: str) -> str | None:
    found = target.fetch_one("SELECT to_regclass('checkpoints') IS NOT NULL AS present")
    if found is None or not found["present"]:
        return None
    row = target.fetch_one(
        "SELECT max(checkpoint_id) AS latest FROM checkpoints "
        "WHERE thread_id = ? AND checkpoint_ns = ?",
        (thread_id, ns),
    )
    return str(row["latest"]) if row is not None and row["latest"] is not None else None


def _copy_one(
    saver: SqliteSaver,
    writer: BaseCheckpointSaver[Any],
    thread_id: str,
    ns: str,
    latest: CheckpointTuple,
) -> None:
    checkpoint_id = str(latest.checkpoint["id"])
    at: RunnableConfig = {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }
    paths = _task_paths(saver, thread_id, ns, checkpoint_id)
    grouped: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in latest.pending_writes or ():
        grouped.setdefault(str(task_id), []).append((channel, value))
    for task_id, writes in grouped.items():
        writer.put_writes(at, writes, task_id, paths.get(task_id, ""))
    parent = (latest.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent
    writer.put(
        config,
        latest.checkpoint,
        latest.metadata,
        dict(latest.checkpoint["channel_versions"]),
    )


def _copy_checkpoints(
    path: Path, live: list[str], target: PostgresLedger, *, dry_run: bool
) -> tuple[int, int]:
    """(copied, already there) of the live tasks' latest checkpoints, every namespace."""
    import psycopg

    saver = _reader(path)
    if saver is None or not live:
        return 0, 0
    try:
        writer: BaseCheckpointSaver[Any] | None = None if dry_run else target.checkpointer()
        copied = present = 0
        for thread_id in live:
            for ns in _namespaces(saver, thread_id):
                latest = saver.get_tuple(
                    {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
                )
                if latest is None:
                    continue
                there = _target_latest(target, thread_id, ns)
                if there is not None and there >= str(latest.checkpoint["id"]):
                    present += 1
                    continue
                if writer is not None:
                    _copy_one(saver, writer, thread_id, ns, latest)
                copied += 1
        return copied, present
    except psycopg.Error as exc:
        raise LedgerStorageError(
            f"copying the checkpoints to {target.location} failed: "
            f"{target._scrub(exc)}; the ledger rows were not copied yet, run it again"
        ) from None
    except sqlite3.Error as exc:
        raise LedgerStorageError(
            f"reading the checkpoints in {path} failed: {exc}; check it with "
            f"`agent-team doctor --db {path}`"
        ) from None
    finally:
        saver.conn.close()


# -- back to a SQLite file (`--reverse`) --------------------------------------------------------


def _held_leases(source: Reader, now: datetime) -> list[str]:
    rows = source.fetch_all(
        "SELECT name, owner, lease_until FROM leases WHERE owner IS NOT NULL ORDER BY name"
    )
    return [
        f"{row['name']} by {row['owner']}"
        for row in rows
        if row["lease_until"] is not None and from_iso(str(row["lease_until"])) > now
    ]


def _refuse_reverse(source: Reader, where: str) -> None:
    """Only a quiet database with nothing in flight goes back: see `transfer_to_sqlite`."""
    held = _held_leases(source, utc_now())
    if held:
        raise LedgerInUseError(
            f"an agent-team daemon still runs on {where} (lease {held[0]}); stop every "
            "daemon on it first (the lease of one that died runs out by itself), "
            "then run migrate-to-postgres --reverse again"
        )
    live = _live_tasks(source)
    if live:
        shown = ", ".join(live[:5]) + (f" and {len(live) - 5} more" if len(live) > 5 else "")
        raise LedgerError(
            f"{len(live)} task(s) in {where} are not finished ({shown}); their LangGraph "
            "checkpoints cannot go back to a file: let them finish or `agent-team cancel` "
            "them on PostgreSQL, then run migrate-to-postgres --reverse again"
        )


def _back_plans(source: PostgresLedger, target: SqliteLedger) -> list[_Plan]:
    there = _target_columns(source)
    plans = []
    for table in copied_tables():
        wanted = {
            str(r["name"])
            for r in target.fetch_all(f"SELECT name FROM pragma_table_info('{table}')")
        }
        columns = there.get(table, [])
        missing = [c for c in columns if c not in wanted and c != "rowid"]
        if not columns or missing:
            raise LedgerError(
                f"the file {target.location} lacks table {table!r} or its column(s) "
                f"{', '.join(missing)}; is it at schema v{SCHEMA_VERSION}?"
            )
        names = ", ".join(columns)  # `rowid` lands in SQLite's own rowid
        values = ", ".join(f"json_extract(value, '$.{c}')" for c in columns)
        key = ", ".join(_primary_key(source, table))
        plans.append(
            _Plan(
                table=table,
                columns=columns,
                select=f"SELECT {names} FROM {table} ORDER BY {key} LIMIT ? OFFSET ?",
                insert=f"INSERT INTO {table} ({names}) SELECT {values} FROM json_each(?)",
            )
        )
    return plans


def _copy_back(
    view: Reader, target: SqliteLedger, plans: list[_Plan], *, dry_run: bool
) -> list[TableCopy]:
    def work(tx: Transaction) -> list[TableCopy]:
        copies = []
        for plan in plans:
            total = inserted = 0
            while True:
                rows = view.fetch_all(plan.select, (_ROWS_PER_STATEMENT, total))
                if not rows:
                    break
                page = [{c: row[i] for i, c in enumerate(plan.columns)} for row in rows]
                inserted += tx.execute(
                    plan.insert, (json.dumps(page, ensure_ascii=False),)
                ).rowcount
                total += len(rows)
                if len(rows) < _ROWS_PER_STATEMENT:
                    break
            copies.append(TableCopy(plan.table, total, inserted))
        if dry_run:
            raise _DryRun(copies)
        return copies

    try:
        return target.write(work)
    except _DryRun as done:
        return done.tables


def transfer_to_sqlite(
    url: str,
    file: str | Path,
    *,
    dry_run: bool = False,
    named: str = DATABASE_URL_VARIABLE,
) -> TransferReport:
    """Copy a PostgreSQL ledger back into a new SQLite file (`migrate-to-postgres --reverse`).

    The way back is narrower than the way there, on purpose:

    - only a database with every task finished (done, failed or cancelled):
      LangGraph's PostgreSQL checkpoints have another format than its SQLite
      ones, and a finished task needs none (`show` and the dashboard read our
      tables), so nothing in flight is silently broken;
    - only with no daemon on it (no execution lease held);
    - only into a new file (or an empty ledger): merging into the file the
      ledger came from would keep that file's stale rows (a task's old status).

    Same as the way there: every ledger table but `RUNTIME_ONLY`, columns by
    name, ids and `rowid`s kept (SQLite's AUTOINCREMENT counters follow the
    inserted ids), one transaction, the file's daemon lock held meanwhile.

    Raises:
        ConfigError: a bad URL or file path, or an unreachable server.
        LedgerInUseError: a daemon runs on the database or the file.
        LedgerError: unfinished tasks, a file with rows, a schema not current.
    """
    from agent_team.db.postgres_ledger import PostgresLedger
    from agent_team.db.schema_postgres import assert_ready_postgres

    _check_url(url, named)
    path = _file_of(file)
    lock = _hold_the_file(path, dry_run=dry_run)
    try:
        try:
            source = PostgresLedger(url, pool_size=2, readonly=True)
        except DatabaseUnreachableError as exc:
            raise _renamed(exc, named) from None
        with source:
            assert_ready_postgres(source)
            with source.snapshot() as view:
                _refuse_reverse(view, source.location)
                before = _file_version(path)
                plans = _back_plans_for(path, source, dry_run=dry_run)
                if plans is None:  # a dry run into a file that does not exist yet
                    counts = [(t, _count(view, t)) for t in copied_tables()]
                    tables = [TableCopy(t, n, n) for t, n in counts]
                else:
                    with SqliteLedger(path) as target:
                        tables = _copy_back(view, target, plans, dry_run=dry_run)
            after = before if dry_run else SCHEMA_VERSION
        return TransferReport(
            source=source.location,
            target=str(path.resolve()),
            source_version=SCHEMA_VERSION,
            target_before=before,
            target_after=after,
            dry_run=dry_run,
            tables=tuple(tables),
            live_tasks=0,
            checkpoints_copied=0,
            checkpoints_present=0,
            released_claims=0,
            reverse=True,
        )
    finally:
        if lock is not None:
            lock.release()


def _file_version(path: Path) -> int:
    if not path.is_file():
        return 0
    with SqliteLedger(path, readonly=True) as file:
        return schema_version(file)


def _count(view: Reader, table: str) -> int:
    row = view.fetch_one(f"SELECT count(*) AS n FROM {table}")
    return int(row["n"]) if row else 0


def _back_plans_for(path: Path, source: PostgresLedger, *, dry_run: bool) -> list[_Plan] | None:
    """The file made (or checked) empty and current; its copy plans. None: dry run, no file."""
    if dry_run and not path.exists():
        return None
    if not dry_run:
        init_db(path)
    assert_ready(path)
    with SqliteLedger(path, readonly=True) as target:
        used = [t for t in copied_tables() if _count(target, t)]
        if used:
            raise LedgerError(
                f"the file {path} already holds rows (in {', '.join(used[:3])}); "
                "--reverse copies into a new file only: give another --from path"
            )
        return _back_plans(source, target)
