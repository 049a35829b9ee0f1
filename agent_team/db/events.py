"""Inbound event de-dup: an outside event id is acted on once (Slack retries, GitHub redeliveries).

The claim is durable, so a redelivery after a restart is still recognised.
A failed action gives its id back (`release_event`), so the sender's
redelivery, which keeps the id, is acted on instead of answered "duplicate".
Old ids are pruned after a retention period (the senders retry for minutes
to hours, never for days).
"""

from __future__ import annotations

from datetime import datetime

from agent_team.db.clock import to_iso, utc_now
from agent_team.db.ledger import Ledger, Reader, write_statement
from agent_team.exceptions import LedgerInputError

__all__ = ["claim_event", "event_seen", "prune_events", "release_event"]


def claim_event(ledger: Ledger, *, source: str, event_id: str, now: datetime | None = None) -> bool:
    """Record that `event_id` from `source` arrived. True only for the first arrival."""
    if not source or not event_id:
        raise LedgerInputError("an event needs a source and an id")

    return (
        write_statement(
            ledger,
            "INSERT INTO seen_events (source, event_id, seen_at) VALUES (?, ?, ?) "
            "ON CONFLICT (source, event_id) DO NOTHING",
            (source, event_id, to_iso(now or utc_now())),
        )
        == 1
    )


def event_seen(ledger: Reader, *, source: str, event_id: str) -> bool:
    row = ledger.fetch_one(
        "SELECT 1 FROM seen_events WHERE source = ? AND event_id = ?", (source, event_id)
    )
    return row is not None


def prune_events(ledger: Ledger, *, older_than: datetime) -> int:
    """Forget event ids seen before `older_than`; returns how many were removed."""

    return write_statement(
        ledger, "DELETE FROM seen_events WHERE seen_at < ?", (to_iso(older_than),)
    )


def release_event(ledger: Ledger, *, source: str, event_id: str) -> bool:
    """Forget that `event_id` from `source` arrived, so its redelivery is acted on.

    Returns:
        True if a claim was removed.
    """
    if not source or not event_id:
        raise LedgerInputError("an event needs a source and an id")

    return (
        write_statement(
            ledger, "DELETE FROM seen_events WHERE source = ? AND event_id = ?", (source, event_id)
        )
        == 1
    )
