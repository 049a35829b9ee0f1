"""Wake-ups across instances: a command made runnable on one instance wakes the others at once.

On PostgreSQL every write that makes a command runnable (a task submitted, an
answer and its resume, a cancel, a retry, a claim handed back) sends a
`NOTIFY` on `COMMANDS_CHANNEL` in its own transaction, so it is delivered when
the write commits and never for a write that rolled back. Each daemon keeps
one connection that `LISTEN`s and sets its worker's wake event
(`Ledger.listen_for_commands`). SQLite has no such channel: commands written
by another process are found by the worker's poll (`AGENT_TEAM_POLL_S`).
The poll stays on with PostgreSQL too, as the fallback for a notification
missed while the listener reconnects (docs/architecture.md §6).
"""

from __future__ import annotations

from agent_team.db.ledger import Dialect, Transaction

__all__ = ["COMMANDS_CHANNEL", "announce_commands"]

COMMANDS_CHANNEL = "agent_team_commands"


def announce_commands(tx: Transaction, dialect: Dialect) -> None:
    """Inside a write: wake every listening instance when it commits (no-op on SQLite)."""
    if dialect.announce_commands:
        tx.execute(dialect.announce_commands)
