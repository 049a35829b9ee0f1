"""Telling "the database is away" apart from "this task went wrong".

A run that fails because the ledger or the checkpoint store cannot be
reached must not be marked failed: the daemon keeps its claim to lapse and
runs the command again once the database is back (docs/architecture.md §6). Errors come
either translated (`LedgerError` subclasses from our ledgers) or raw from a
LangGraph saver (sqlite3 / psycopg errors), so both are recognised here,
inside `db/`, where the drivers may be named.
"""

from __future__ import annotations

import sqlite3
import sys

from agent_team.exceptions import (
    FencedError,
    LedgerBusyError,
    LedgerCorruptError,
    LedgerIntegrityError,
    LedgerStorageError,
)

__all__ = ["is_outage", "refused_by_database"]


def _driver_outage(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return True
    psycopg = sys.modules.get("psycopg")  # only loaded when PostgreSQL is in use
    if psycopg is not None and isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return True
    pool = sys.modules.get("psycopg_pool")
    return pool is not None and isinstance(exc, pool.PoolTimeout)


def is_outage(exc: BaseException) -> bool:
    """True when `exc` (or what caused it) says the database is unreachable or stuck busy."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, FencedError | LedgerIntegrityError | LedgerCorruptError):
            return False
        if isinstance(current, LedgerBusyError | LedgerStorageError) or _driver_outage(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def refused_by_database(exc: BaseException) -> bool:
    """The database failed a write (away, stuck, full, read-only, damaged): readiness counts it."""
    return is_outage(exc) or isinstance(exc, LedgerCorruptError)
