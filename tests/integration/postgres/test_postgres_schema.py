"""The schema on PostgreSQL: schema.postgres.sql, one migration for daemons starting together."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from agent_team import db
from agent_team.db import postgres_ledger
from agent_team.db.postgres_ledger import LOCK_KEY, PostgresLedger
from agent_team.db.schema_postgres import dump_postgres_schema, migrate_postgres
from agent_team.exceptions import LedgerIntegrityError, LedgerNotReadyError, SchemaTooNewError
from tests.integration.test_schema_file import ENUM_CHECKS, run_cli

REPO_ROOT = Path(__file__).resolve().parents[3]
SCHEMA_POSTGRES_SQL = REPO_ROOT / "schema.postgres.sql"
STALE = (
    "schema.postgres.sql is out of date with the migrations in agent_team/db/schema_steps.py and "
    "schema_postgres.py: run `make schema`"
)


def test_schema_postgres_sql_is_what_init_db_makes(pg_url: str) -> None:
    assert db.init_db(pg_url) == db.SCHEMA_VERSION
    with PostgresLedger(pg_url) as ledger:
        assert dump_postgres_schema(ledger) == SCHEMA_POSTGRES_SQL.read_text(encoding="utf-8"), (
            STALE
        )


def test_cli_schema_dialect_postgres_prints_it_and_leaves_the_database_empty(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TEAM_DATABASE_URL", pg_url)

    proc = run_cli("schema", "--dialect", "postgres", cwd=tmp_path)

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == SCHEMA_POSTGRES_SQL.read_text(encoding="utf-8"), STALE
    with psycopg.connect(pg_url) as conn:
        left = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema NOT IN "
            "('pg_catalog', 'information_schema')"
        ).fetchone()
        schemas = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'agent_team_scratch%'"
        ).fetchone()
    assert left == (0,) and schemas == (0,)


def test_every_check_list_has_its_enum_on_postgres(pg_url: str) -> None:
    db.init_db(pg_url)
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE contype = 'c' AND pg_get_constraintdef(oid) LIKE '%ANY (ARRAY[%'"
        ).fetchall()
    found = {}
    for table, definition in rows:
        column = definition.split("((", 1)[1].split(" ", 1)[0]
        values = sorted(part.split("'")[1] for part in definition.split("ARRAY[", 1)[1].split(","))
        found[(table, column)] = values
    assert found == {key: sorted(m.value for m in enum) for key, enum in ENUM_CHECKS.items()}


def test_a_check_refuses_a_value_outside_the_enum(pg_url: str) -> None:
    db.init_db(pg_url)
    with db.open_ledger(pg_url) as ledger, pytest.raises(LedgerIntegrityError, match="check"):
        ledger.write(
            lambda tx: tx.execute(
                "INSERT INTO tasks (id, kind, source, title, created_at, updated_at) "
                "VALUES ('t', 'bogus', 'cli', 't', 'x', 'x')"
            )
        )


def test_daemons_starting_together_migrate_once(pg_url: str) -> None:
    starters = 6
    barrier = threading.Barrier(starters)

    def start() -> int:
        barrier.wait()
        return db.init_db(pg_url)

    with ThreadPoolExecutor(max_workers=starters) as pool:
        versions = list(pool.map(lambda _: start(), range(starters)))

    assert versions == [db.SCHEMA_VERSION] * starters
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT id, schema_version FROM schema_meta").fetchall() == [
            (1, db.SCHEMA_VERSION)
        ]
    db.assert_ready(pg_url)


def test_a_migration_waiting_for_the_lock_never_blocks_the_checkpoint_setup(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon booting while another sets LangGraph's tables up must not deadlock with it.

    The setup holds `LOCK_KEY` on a session of its own while it runs `CREATE INDEX
    CONCURRENTLY`, which waits for every transaction with an older snapshot: a
    migration waiting for the lock inside its transaction would be waited for, and
    would itself wait for the lock, for ever.
    """
    db.init_db(pg_url)
    tried = threading.Event()  # the migration found the lock taken and backs off
    pause = postgres_ledger._pause

    def noted_pause(seconds: float) -> None:
        tried.set()
        pause(seconds)

    monkeypatch.setattr(postgres_ledger, "_pause", noted_pause)
    with (
        psycopg.connect(pg_url, autocommit=True) as setup,
        psycopg.connect(pg_url, autocommit=True) as indexer,
    ):
        setup.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))  # the setup's session lock
        indexer.execute("CREATE TABLE setup_probe (id int)")
        with ThreadPoolExecutor(max_workers=1) as pool:
            migrating = pool.submit(db.init_db, pg_url)  # another daemon boots meanwhile
            try:
                deadline = time.monotonic() + 10
                while not (tried.is_set() or _waits_for_the_lock(indexer) or migrating.done()):
                    assert time.monotonic() < deadline, "the migration never asked for the lock"
                    time.sleep(0.02)
                indexer.execute("SET statement_timeout = '10s'")
                indexer.execute("CREATE INDEX CONCURRENTLY setup_probe_idx ON setup_probe (id)")
            finally:
                setup.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
            assert migrating.result(timeout=30) == db.SCHEMA_VERSION


def _waits_for_the_lock(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Another session of this database waits inside a statement for an advisory lock."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
    ).fetchone()
    return bool(row and row[0])


def test_migrate_is_idempotent_and_assert_ready_names_what_is_missing(pg_url: str) -> None:
    with pytest.raises(LedgerNotReadyError, match="schema version 0"):
        db.assert_ready(pg_url)
    db.init_db(pg_url)
    assert db.init_db(pg_url) == db.SCHEMA_VERSION
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE side_effects DROP COLUMN result_ref")
    with pytest.raises(LedgerNotReadyError, match="result_ref"):
        db.assert_ready(pg_url)


def test_a_newer_schema_is_refused(pg_url: str) -> None:
    db.init_db(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE schema_meta SET schema_version = 99")
    with pytest.raises(SchemaTooNewError, match="99"):
        db.init_db(pg_url)
    with pytest.raises(SchemaTooNewError):
        db.assert_ready(pg_url)


def test_v12_to_v13_keeps_the_tasks_and_gives_them_no_pause(pg_url: str) -> None:
    with PostgresLedger(pg_url) as ledger:
        assert migrate_postgres(ledger, target=12) == 12
    stamp = "2026-12-01T09:00:00.000000Z"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tasks (id, kind, source, title, status, phase, created_at, updated_at) "
            "VALUES ('t-1', 'code', 'cli', 'T', 'running', 'plan', %s, %s)",
            (stamp, stamp),
        )

    assert db.init_db(pg_url) == db.SCHEMA_VERSION
    db.assert_ready(pg_url)

    with db.open_ledger(pg_url) as ledger:
        task = db.get_task(ledger, "t-1")
        assert task is not None
        assert (task.status, task.updated_at, task.resume_at, task.model_parks) == (
            "running",
            stamp,
            None,
            0,
        )
        assert db.list_model_failures(ledger, "t-1") == []
        now = datetime(2026, 12, 1, 10, tzinfo=UTC)
        assert db.park_for_models(ledger, "t-1", pauses=[timedelta(minutes=5)], now=now) == (
            now + timedelta(minutes=5)
        )
        with pytest.raises(LedgerIntegrityError, match="check"):
            ledger.write(lambda tx: tx.execute("UPDATE tasks SET model_parks = -1"))
