"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_team import db
from agent_team.config import ENV_PREFIX


@pytest.fixture
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Settings come from the test alone: no AGENT_TEAM_* variables, and an empty
    working folder (so no stray `.env`). Folders that build Settings use it autouse."""
    for name in list(os.environ):
        if name.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
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
