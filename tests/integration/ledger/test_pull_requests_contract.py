"""Contract: a task's pull request, and its events acted on once with the answer that acts."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInputError

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def _gate(ledger: db.Ledger, turn: int) -> str:
    question_id = f"t1:q{turn}"
    db.ensure_question(
        ledger,
        question_id=question_id,
        thread_id="t1",
        turn=turn,
        kind="pull_request",
        transport="local",
        deadline_at=None,
        payload_json="{}",
    )
    return question_id


def _answer(ledger: db.Ledger, question_id: str, *keys: str) -> bool:
    return db.answer_question(
        ledger,
        question_id=question_id,
        answer_json=json.dumps({"decision": "feedback"}),
        answered_via="github:reviewer",
        answered_at=NOW,
        events=[db.NewPrEvent(key, "comment", round=1, actor="reviewer") for key in keys],
    )


@pytest.fixture
def watched(ledger: db.Ledger) -> db.Ledger:
    assert db.create_task(ledger, task_id="t1", kind="code", title="A PR")
    row = db.watch_pull_request(
        ledger, task_id="t1", repo="Acme/App", number=7, url="u", head_sha="a" * 40, at=NOW
    )
    assert (row.repo, row.number, row.state, row.rounds) == ("acme/app", 7, "open", 0)
    return ledger


def test_watching_again_changes_nothing_and_a_pr_has_one_task(watched: db.Ledger) -> None:
    again = db.watch_pull_request(
        watched, task_id="t1", repo="acme/app", number=7, url="other", head_sha=None, at=NOW
    )
    assert again.url == "u" and again.head_sha == "a" * 40
    assert db.create_task(watched, task_id="t2", kind="code", title="Another")
    with pytest.raises(LedgerInputError, match="another task"):
        db.watch_pull_request(
            watched, task_id="t2", repo="acme/app", number=7, url="u", head_sha=None, at=NOW
        )
    found = db.find_pull_request(watched, "ACME/app", 7)
    assert found is not None and found.task_id == "t1"
    assert db.get_pull_request(watched, "t2") is None


def test_the_watch_list_is_open_prs_waiting_on_an_open_gate(watched: db.Ledger) -> None:
    assert db.watched_pull_requests(watched) == []
    gate = _gate(watched, 1)
    (one,) = db.watched_pull_requests(watched)
    assert (one.pull.task_id, one.question_id) == ("t1", gate)
    assert db.note_pull_request(watched, "t1", state="merged", closed_at=NOW)
    assert db.watched_pull_requests(watched) == []
    assert not db.note_pull_request(watched, "nobody", rounds=1)
    with pytest.raises(LedgerInputError):
        db.note_pull_request(watched, "t1", state="gone")
    with pytest.raises(LedgerInputError):
        db.note_pull_request(watched, "t1", repo="x/y")


def test_an_event_is_acted_on_once_across_gates(watched: db.Ledger) -> None:
    first = _gate(watched, 1)
    assert _answer(watched, first, "comment:1", "comment:2")
    second = _gate(watched, 2)
    # The same comment again (a poller that read it before the first answer landed).
    assert not _answer(watched, second, "comment:2", "comment:3")
    question = db.get_question(watched, second)
    assert question is not None and question.status == "open"
    assert db.pr_event_keys(watched, "t1") == {"comment:1", "comment:2"}
    assert db.get_command(watched, f"resume:{second}") is None
    assert _answer(watched, second, "comment:3")
    keys = [e.event_key for e in db.list_pr_events(watched, "t1")]
    assert keys == ["comment:1", "comment:2", "comment:3"]


def test_a_closed_gate_stores_no_events(watched: db.Ledger) -> None:
    gate = _gate(watched, 1)
    assert _answer(watched, gate, "pr:merged")
    assert not _answer(watched, gate, "comment:9")
    assert db.pr_event_keys(watched, "t1") == {"pr:merged"}


def test_record_pr_event_once_and_bad_events_refused(watched: db.Ledger) -> None:
    event = db.NewPrEvent("ci:abc:rerun", "ci_rerun", head_sha="abc", detail={"runs": [1]})
    assert db.record_pr_event(watched, "t1", event, at=NOW)
    assert not db.record_pr_event(watched, "t1", event, at=NOW)
    (stored,) = db.list_pr_events(watched, "t1")
    assert stored.detail == {"runs": [1]}
    for bad in (
        db.NewPrEvent("", "x"),
        db.NewPrEvent("k", ""),
        db.NewPrEvent("k", "x", round=-1),
        db.NewPrEvent("k", "x", detail={"big": "x" * 9000}),
    ):
        with pytest.raises(LedgerInputError):
            db.record_pr_event(watched, "t1", bad, at=NOW)
    assert len(db.list_pr_events(watched, "t1")) == 1
