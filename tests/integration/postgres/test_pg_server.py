"""The throwaway PostgreSQL the tests run on: reachable, fresh per test, gone afterwards."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.pg_server import PgServer, running_server


def test_each_test_gets_an_empty_database_of_its_own(pg_server: PgServer, pg_url: str) -> None:
    other = pg_server.create_database()
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("CREATE TABLE only_here (x INTEGER)")
        with psycopg.connect(other, autocommit=True) as conn:
            found = conn.execute("SELECT to_regclass('only_here')").fetchone()
        assert found == (None,)
    finally:
        pg_server.drop_database(other)


def test_server_version_is_15_or_newer(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        assert conn.info.server_version >= 150000


@pytest.mark.slow
def test_server_stops_and_its_folder_goes_even_when_the_body_fails() -> None:
    with pytest.raises(RuntimeError, match="a failing test"), running_server() as server:
        folder, url = server.folder, server.admin_url
        with psycopg.connect(url) as conn:
            conn.execute("SELECT 1")
        raise RuntimeError("a failing test")

    assert not folder.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)


@pytest.mark.slow
def test_a_server_left_by_a_killed_run_is_stopped_by_the_next_one() -> None:
    code = (
        "import os; from tests.pg_server import PgServer; "
        "server = PgServer().start(); print(server.folder, server.admin_url, flush=True); "
        "os._exit(9)"  # as if killed: no teardown
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    folder, url = proc.stdout.split()
    with psycopg.connect(url) as conn:
        conn.execute("SELECT 1")

    PgServer().stop()

    assert not Path(folder).exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)
