"""Small builders shared by the contract tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import pytest

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


@contextmanager
def counted_writes(ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """The `flush` flag of every commit `ledger` makes inside the block (a group commit of
    `write_together` counts once, as flushed)."""
    flushes: list[bool] = []
    real, real_together = ledger.write, ledger.write_together
    inside = threading.local()

    def write(work: Callable[[Any], Any], *, flush: bool = True) -> Any:
        if not getattr(inside, "together", False):
            flushes.append(flush)
        return real(work, flush=flush)

    def write_together(work: Callable[[Any], Any]) -> Any:
        flushes.append(True)
        inside.together = True
        try:
            return real_together(work)
        finally:
            inside.together = False

    with monkeypatch.context() as patch:
        patch.setattr(ledger, "write", write)
        patch.setattr(ledger, "write_together", write_together)
        yield flushes
