"""The ledger contract suite runs against every backend registered here.

A backend is a factory: given the test's request and a fresh folder, it
yields a migrated, empty `db.Ledger` and closes it afterwards (as langgraph's checkpoint conformance
suite registers one saver factory per backend). Every test in this folder
takes the `ledger` fixture, typed to the protocol, so a second backend (the
PostgreSQL one) only adds a factory here and must pass unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from agent_team import db

LedgerFactory = Callable[[pytest.FixtureRequest, Path], AbstractContextManager[db.Ledger]]
BACKENDS: dict[str, LedgerFactory] = {}


def backend(name: str) -> Callable[[LedgerFactory], LedgerFactory]:
    """Register a ledger factory under `name` for the whole contract suite."""

    def register(factory: LedgerFactory) -> LedgerFactory:
        BACKENDS[name] = factory
        return factory

    return register


@backend("sqlite")
@contextmanager
def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[db.Ledger]:
    path = tmp_path / "contract" / "agent-team.db"
    db.init_db(path)
    with db.open_ledger(path) as ledger:
        yield ledger


@backend("postgres")
@contextmanager
def _postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[db.Ledger]:
    """A fresh database on the session's throwaway server (skips if it cannot start)."""
    url = request.getfixturevalue("pg_url")
    db.init_db(url)
    with db.open_ledger(url, files_dir=tmp_path / "contract") as ledger:
        yield ledger


@pytest.fixture(params=sorted(BACKENDS))
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[db.Ledger]:
    """A fresh ledger for each registered backend."""
    with BACKENDS[request.param](request, tmp_path) as made:
        yield made
