"""Reads the Slack transport needs beyond the gate protocol's own.

`find_open_question_kind_by_channel_ref` matches open rows only (the
anti-replay rule). To tell someone who replies in the thread of an answered
question *who* answered it and when, the listener also needs the closed row
behind a message; and a question answered elsewhere (CLI, dashboard) or
just before a crash still has buttons in Slack until the redraw pass finds it.
"""

from __future__ import annotations

from datetime import datetime

from agent_team.db.clock import to_iso
from agent_team.db.ledger import Reader
from agent_team.db.records import Question, fetch_record, fetch_records

__all__ = ["answered_since", "find_question_by_channel_ref"]


def find_question_by_channel_ref(ledger: Reader, channel_ref: str) -> Question | None:
    """The newest question posted at `channel_ref`, whatever its status (never used to answer)."""
    return fetch_record(
        ledger,
        Question,
        "SELECT * FROM pending_questions WHERE channel_ref = ? ORDER BY rowid DESC LIMIT 1",
        (channel_ref,),
    )


def answered_since(ledger: Reader, since: datetime) -> list[Question]:
    """Questions answered at or after `since`, oldest answer first (the redraw pass)."""
    return fetch_records(
        ledger,
        Question,
        "SELECT * FROM pending_questions WHERE status = 'answered' AND answered_at >= ? "
        "ORDER BY answered_at",
        (to_iso(since),),
    )
