"""Reads the Slack transport needs beyond the gate protocol's own.

`find_open_question_kind_by_channel_ref` matches open rows only (the
anti-replay rule). To tell someone who replies in the thread of an answered
question *who* answered it and when, the listener also needs the closed row
behind a message.
"""

from __future__ import annotations

import sqlite3

from agent_team.db.connection import fetch_one
from agent_team.db.records import Question, row_to

__all__ = ["find_question_by_channel_ref"]


def find_question_by_channel_ref(conn: sqlite3.Connection, channel_ref: str) -> Question | None:
    """The newest question posted at `channel_ref`, whatever its status (never used to answer)."""
    row = fetch_one(
        conn,
        "SELECT * FROM pending_questions WHERE channel_ref = ? ORDER BY rowid DESC LIMIT 1",
        (channel_ref,),
    )
    return row_to(Question, row) if row else None
