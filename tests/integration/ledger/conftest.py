"""The ledger contract suite runs against every backend listed in `BACKENDS`.

A backend is a factory that returns a fresh, migrated connection the `db`
functions accept. PostgreSQL will join SQLite here; every test in this folder
must then pass unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_team import db


def _sqlite(tmp_path: Path) -> db.Ledger:
    path = tmp_path / "contract" / "agent-team.db"
    db.init_db(path)
    return db.open_ledger(path)


BACKENDS: dict[str, Callable[[Path], db.Ledger]] = {"sqlite": _sqlite}


@pytest.fixture(params=sorted(BACKENDS))
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[db.Ledger]:
    """A fresh ledger connection for each backend."""
    connection = BACKENDS[request.param](tmp_path)
    yield connection
    connection.close()
