"""Undo an event claim: the one write the Slack listener needs beyond `claim_event`.

The listener claims an Events API delivery before acting on it, so Slack's
retries are acted on once. If acting then fails (the ledger stayed busy, a
bug), the claim must go again: the listener answers 500, Slack retries, and
the retry has to be processed instead of being taken for a duplicate.
"""

from __future__ import annotations

import sqlite3

from agent_team.db.connection import write_transaction
from agent_team.exceptions import LedgerInputError

__all__ = ["forget_event"]


def forget_event(conn: sqlite3.Connection, *, source: str, event_id: str) -> bool:
    """Remove the claim of `event_id` from `source`; True if there was one."""
    if not source or not event_id:
        raise LedgerInputError("an event needs a source and an id")

    def work(db: sqlite3.Connection) -> bool:
        cur = db.execute(
            "DELETE FROM seen_events WHERE source = ? AND event_id = ?", (source, event_id)
        )
        return cur.rowcount == 1

    return write_transaction(conn, work)
