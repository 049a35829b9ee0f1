"""One entry that opens the ledger wherever it is: a SQLite file or a PostgreSQL database."""

from __future__ import annotations

from pathlib import Path

from agent_team.db.ledger import Ledger
from agent_team.db.sqlite_ledger import SqliteLedger
from agent_team.db.url import parse_target

__all__ = ["open_ledger"]


def open_ledger(
    target: str | Path, *, readonly: bool = False, files_dir: Path | None = None
) -> Ledger:
    """Open the ledger at a path, `sqlite:///path` or `postgresql://user@host/db`.

    psycopg is imported only for a PostgreSQL URL, so SQLite users need nothing new.

    Args:
        files_dir: where a PostgreSQL ledger keeps its side files (the budget
            outbox); default the working folder. A SQLite ledger keeps them
            beside its file and ignores this.

    Raises:
        ConfigError: the URL is malformed (names AGENT_TEAM_DATABASE_URL, never the password).
        DatabaseUnreachableError: the PostgreSQL server cannot be connected to.
        LedgerError: the SQLite file cannot be opened as a ledger.
    """
    where = parse_target(target)
    if where.url is not None:
        from agent_team.db.postgres_ledger import PostgresLedger

        return PostgresLedger(where.url, readonly=readonly, files_dir=files_dir)
    assert where.path is not None
    return SqliteLedger(where.path, readonly=readonly)
