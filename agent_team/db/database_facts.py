"""What `agent-team doctor` reads of a PostgreSQL ledger, in one short read-only session.

Several daemons share one database, and each holds up to
`CONNECTIONS_PER_DAEMON` connections; the check that matters before adding a
daemon is whether the server has that many to spare, so the facts carry
the server's limit and what is in use now.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_team.db.postgres_ledger import CONNECTIONS_PER_DAEMON, PostgresLedger
from agent_team.db.schema_postgres import postgres_version

__all__ = ["CONNECTIONS_PER_DAEMON", "DatabaseFacts", "postgres_facts"]


@dataclass(frozen=True)
class DatabaseFacts:
    location: str  # host and database, no password
    server_version: str
    schema_version: int
    checkpoints_ready: bool  # LangGraph's tables at its newest migration
    connections_used: int
    max_connections: int
    reserved_connections: int  # kept for superusers: not ours to use

    @property
    def connections_free(self) -> int:
        return self.max_connections - self.reserved_connections - self.connections_used


def postgres_facts(url: str) -> DatabaseFacts:
    """Read the facts (raises `DatabaseUnreachableError` with a clear line if it cannot)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresLedger(url, readonly=True, pool_size=1) as ledger:
        row = ledger.fetch_one(
            "SELECT current_setting('server_version') AS version, "
            "current_setting('max_connections')::int AS max_connections, "
            "current_setting('superuser_reserved_connections')::int AS reserved, "
            "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') "
            "AS used"
        )
        assert row is not None  # a SELECT without FROM returns one row
        return DatabaseFacts(
            location=ledger.location,
            server_version=str(row["version"]),
            schema_version=postgres_version(ledger),
            checkpoints_ready=ledger.checkpoints_current(len(PostgresSaver.MIGRATIONS) - 1),
            connections_used=int(row["used"]),
            max_connections=int(row["max_connections"]),
            reserved_connections=int(row["reserved"]),
        )
