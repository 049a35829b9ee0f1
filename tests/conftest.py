"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.config import ENV_PREFIX
from tests.git_server import GitServer
from tests.pg_server import PgServer, PgServerError

# The daemon answers only to the Host names it knows (DNS rebinding); Starlette's test
# client calls itself `testserver`, which no daemon lists. Tests talk to `localhost`,
# which every daemon answers to, as a browser on the same machine does.
_defaults = list(TestClient.__init__.__defaults__ or ())
if _defaults and _defaults[0] == "http://testserver":
    _defaults[0] = "http://localhost"
    TestClient.__init__.__defaults__ = tuple(_defaults)


@pytest.fixture(autouse=True)
def _builds_unsandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds run unsandboxed (`AGENT_TEAM_SANDBOX=none`) unless a test asks for the sandbox.

    Many tests signal a running build through files in `tmp_path`, which a sandbox
    hides. The sandbox has tests of its own, which pass `sandbox=` themselves
    (tests/integration/builders/test_sandbox.py, tests/e2e/test_sandboxed_daemon.py).
    """
    monkeypatch.setenv(f"{ENV_PREFIX}SANDBOX", "none")


@pytest.fixture
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Settings come from the test alone: no AGENT_TEAM_* variables, and an empty
    working folder (so no stray `.env`). Folders that build Settings use it autouse.
    Builds stay unsandboxed, as `_builds_unsandboxed` set."""
    for name in list(os.environ):
        if name.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    monkeypatch.setenv(f"{ENV_PREFIX}SANDBOX", "none")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    """A freshly migrated ledger file."""
    path = tmp_path / "ledger" / "agent-team.db"
    db.init_db(path)
    return path


@pytest.fixture
def conn(ledger_file: Path) -> Iterator[db.Ledger]:
    """A `db.Ledger` on `ledger_file`, closed after the test."""
    connection = db.open_ledger(ledger_file)
    yield connection
    connection.close()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One throwaway PostgreSQL for the session, started on first use, stopped at the end.

    Skips the tests that need it, naming the step that failed, only when it
    cannot be started at all.
    """
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("PostgreSQL tests need psycopg: pip install -e '.[postgres]'")
    try:
        server = PgServer()
    except PgServerError as exc:
        pytest.skip(f"no PostgreSQL for the tests: {exc}")
    try:
        server.start()
    except PgServerError as exc:
        server.stop()
        pytest.skip(f"the throwaway PostgreSQL did not start: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh, empty database on the throwaway server (dropped after the test)."""
    url = pg_server.create_database()
    try:
        yield url
    finally:
        pg_server.drop_database(url)


@pytest.fixture
def git_server(tmp_path: Path) -> Iterator[GitServer]:
    """A loopback git host (smart HTTP through `git http-backend`) over `tmp_path/git-host`.

    Add remotes with `git_server.add("owner/name")`; set `token` to make it
    private and `gone` to make it answer 503 (see `tests/git_server.py`).
    """
    with GitServer(tmp_path / "git-host") as server:
        yield server
