"""The local transport's log line: how to answer, or, for the PR gate, who answers it."""

from __future__ import annotations

import json
import logging

import pytest

from agent_team.db import Question, Task
from agent_team.transports.local import LocalTransport

TASK = Task(
    id="t1",
    kind="code",
    source="cli",
    source_ref=None,
    title="T",
    body="",
    status="waiting",
    phase="pr_open",
    parked_reason=None,
    created_at="2026-03-02T10:00:00.000000Z",
    updated_at="2026-03-02T10:00:00.000000Z",
)


def asked(kind: str, payload: dict[str, object]) -> Question:
    return Question(
        question_id="t1:q3",
        thread_id="t1",
        turn=3,
        kind=kind,
        status="open",
        transport="local",
        channel_ref=None,
        posted_at=None,
        deadline_at=None,
        answer_json=None,
        answered_at=None,
        answered_via=None,
        payload_json=json.dumps(payload),
    )


def test_the_pr_gate_is_logged_as_waiting_on_github_not_as_a_question_to_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = "https://github.com/o/r/pull/7"
    with caplog.at_level(logging.INFO, logger="agent_team.transports.local"):
        gate = LocalTransport().deliver(asked("pull_request", {"url": url}), TASK)
        decision = LocalTransport().deliver(asked("pr_decision", {"text": "Decide"}), TASK)
    assert gate == decision == "local:t1:q3"
    first, second = (record.getMessage() for record in caplog.records)
    assert first == f"task t1 waits on GitHub: pull request {url} (t1:q3); the watcher answers it"
    assert "answer t1:q3 <text>" in second
