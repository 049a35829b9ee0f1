"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_team import db


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    """A freshly migrated ledger file."""
    path = tmp_path / "ledger" / "agent-team.db"
    db.init_db(path)
    return path


@pytest.fixture
def conn(ledger_file: Path) -> Iterator[db.LedgerConnection]:
    """A connection to `ledger_file`, closed after the test."""
    connection = db.connect(ledger_file)
    yield connection
    connection.close()
