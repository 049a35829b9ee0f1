"""Small builders shared by the contract tests."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agent_team import db


def ask(
    conn: db.Ledger,
    question_id: str = "q1",
    *,
    thread_id: str = "task-1",
    turn: int = 1,
    kind: str = "clarify",
    deadline_at: datetime | None = None,
    payload: dict[str, Any] | None = None,
) -> bool:
    """Create an open question with sensible defaults."""
    return db.ensure_question(
        conn,
        question_id=question_id,
        thread_id=thread_id,
        turn=turn,
        kind=kind,
        transport="local",
        deadline_at=deadline_at,
        payload_json=json.dumps(payload or {"text": f"question {question_id}?"}),
    )


def answer(conn: db.Ledger, question_id: str = "q1", text: str = "yes") -> bool:
    return db.answer_question(
        conn, question_id=question_id, answer_json=json.dumps({"text": text}), answered_via="cli"
    )
