"""Contract: the pending_questions ledger and its compare-and-sets."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInputError
from tests.integration.ledger.helpers import answer, ask


def snapshot(conn: db.Ledger) -> list[dict[str, object]]:
    return [asdict(q) for q in db.list_questions(conn)]


def test_ensure_question_is_idempotent_and_keeps_the_first_row(ledger: db.Ledger) -> None:
    deadline = datetime(2030, 1, 1, tzinfo=UTC)
    assert ask(ledger, "q1", turn=2, kind="plan_decision", deadline_at=deadline) is True
    before = snapshot(ledger)
    assert ask(ledger, "q1", thread_id="other", turn=3, kind="clarify") is False
    assert snapshot(ledger) == before

    question = db.get_question(ledger, "q1")
    assert question is not None
    assert (question.thread_id, question.turn, question.kind) == ("task-1", 2, "plan_decision")
    assert (question.status, question.transport, question.channel_ref) == ("open", "local", None)
    assert question.deadline_at == "2030-01-01T00:00:00.000000Z"
    assert question.payload == {"text": "question q1?"}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("kind", "approve_everything", "question kind"),
        ("turn", 0, "turn"),
        ("payload_json", "{not json", "not valid JSON"),
    ],
)
def test_ensure_question_refuses_bad_input_and_stores_nothing(
    ledger: db.Ledger, field: str, value: object, message: str
) -> None:
    args: dict[str, object] = {
        "question_id": "q1",
        "thread_id": "task-1",
        "turn": 1,
        "kind": "clarify",
        "transport": "local",
        "deadline_at": None,
        "payload_json": "{}",
    }
    args[field] = value
    with pytest.raises(LedgerInputError, match=message):
        db.ensure_question(ledger, **args)  # type: ignore[arg-type]
    assert db.list_questions(ledger) == []


def test_naive_deadline_is_refused(ledger: db.Ledger) -> None:
    with pytest.raises(LedgerInputError, match="time zone"):
        ask(ledger, deadline_at=datetime(2030, 1, 1))
    assert db.list_questions(ledger) == []


def test_record_delivery_sets_a_missing_channel_ref_once(ledger: db.Ledger) -> None:
    ask(ledger)
    posted = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
    assert db.record_delivery(ledger, question_id="q1", channel_ref="C1:100.1", posted_at=posted)
    assert not db.record_delivery(ledger, question_id="q1", channel_ref="C1:200.2")
    question = db.get_question(ledger, "q1")
    assert question is not None
    assert question.channel_ref == "C1:100.1"
    assert question.posted_at == "2026-12-02T09:00:00.000000Z"
    assert not db.record_delivery(ledger, question_id="missing", channel_ref="C1:300.3")
    with pytest.raises(LedgerInputError):
        db.record_delivery(ledger, question_id="q1", channel_ref="")


def test_record_delivery_refuses_a_closed_question(ledger: db.Ledger) -> None:
    ask(ledger)
    assert db.expire_question(ledger, question_id="q1")
    assert not db.record_delivery(ledger, question_id="q1", channel_ref="C1:1.0")
    question = db.get_question(ledger, "q1")
    assert question is not None and question.channel_ref is None


def test_two_open_questions_cannot_share_a_channel_ref(ledger: db.Ledger) -> None:
    ask(ledger, "q1")
    ask(ledger, "q2", turn=2)
    assert db.record_delivery(ledger, question_id="q1", channel_ref="C1:1.0")
    with pytest.raises(LedgerInputError, match="another open question"):
        db.record_delivery(ledger, question_id="q2", channel_ref="C1:1.0")
    q2 = db.get_question(ledger, "q2")
    assert q2 is not None and q2.channel_ref is None
    assert db.find_open_question_by_channel_ref(ledger, "C1:1.0") == "q1"


def test_answered_channel_ref_no_longer_resolves(ledger: db.Ledger) -> None:
    ask(ledger, "q1", kind="plan_decision")
    db.record_delivery(ledger, question_id="q1", channel_ref="C1:1.0")
    assert db.find_open_question_kind_by_channel_ref(ledger, "C1:1.0") == ("q1", "plan_decision")
    assert answer(ledger, "q1")
    assert db.find_open_question_by_channel_ref(ledger, "C1:1.0") is None
    assert db.find_open_question_kind_by_channel_ref(ledger, "C1:1.0") is None
    # The partial index covers open rows only: a new open question may reuse the handle.
    ask(ledger, "q2", turn=2)
    assert db.record_delivery(ledger, question_id="q2", channel_ref="C1:1.0")
    assert db.find_open_question_by_channel_ref(ledger, "C1:1.0") == "q2"


def test_answer_flips_the_row_and_queues_exactly_one_resume(ledger: db.Ledger) -> None:
    ask(ledger, "q1", thread_id="task-7")
    when = datetime(2026, 12, 2, 10, 30, tzinfo=UTC)
    assert db.answer_question(
        ledger,
        question_id="q1",
        answer_json=json.dumps({"decision": "approve"}),
        answered_via="slack:U123",
        answered_at=when,
    )
    question = db.get_question(ledger, "q1")
    assert question is not None
    assert question.status == "answered"
    assert question.answer == {"decision": "approve"}
    assert question.answered_via == "slack:U123"
    assert question.answered_at == "2026-12-02T10:30:00.000000Z"

    commands = db.list_commands(ledger, task_id="task-7")
    assert [(c.command_id, c.kind, c.state) for c in commands] == [
        ("resume:q1", "resume", "pending")
    ]
    assert commands[0].payload == {"question_id": "q1", "answer": {"decision": "approve"}}

    assert not answer(ledger, "q1", "a late second answer")
    question_after = db.get_question(ledger, "q1")
    assert question_after == question
    assert len(db.list_commands(ledger)) == 1


def test_answer_to_unknown_question_is_false(ledger: db.Ledger) -> None:
    assert not answer(ledger, "nope")
    assert db.list_commands(ledger) == []


def test_answer_that_is_not_json_is_refused_and_nothing_changes(
    ledger: db.Ledger,
) -> None:
    ask(ledger)
    before = snapshot(ledger)
    with pytest.raises(LedgerInputError, match="not valid JSON"):
        db.answer_question(ledger, question_id="q1", answer_json="approve", answered_via="cli")
    assert snapshot(ledger) == before
    assert db.list_commands(ledger) == []


def test_answer_after_the_deadline_loses(ledger: db.Ledger) -> None:
    deadline = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    ask(ledger, deadline_at=deadline)
    late = deadline + timedelta(microseconds=1)
    assert not db.answer_question(
        ledger, question_id="q1", answer_json='"yes"', answered_via="cli", answered_at=late
    )
    question = db.get_question(ledger, "q1")
    assert question is not None and question.status == "open"
    assert db.list_commands(ledger) == []
    on_time = deadline - timedelta(seconds=1)
    assert db.answer_question(
        ledger, question_id="q1", answer_json='"yes"', answered_via="cli", answered_at=on_time
    )


def test_expire_then_reopen_then_answer(ledger: db.Ledger) -> None:
    ask(ledger, deadline_at=datetime(2026, 1, 1, tzinfo=UTC))
    db.record_delivery(ledger, question_id="q1", channel_ref="C1:5.0")
    assert db.expire_question(ledger, question_id="q1")
    assert not db.expire_question(ledger, question_id="q1")
    assert not answer(ledger, "q1")
    assert db.find_open_question_by_channel_ref(ledger, "C1:5.0") is None

    new_deadline = datetime.now(UTC) + timedelta(hours=4)
    assert not db.reopen_question(ledger, question_id="missing", deadline_at=new_deadline)
    assert db.reopen_question(ledger, question_id="q1", deadline_at=new_deadline)
    reopened = db.get_question(ledger, "q1")
    assert reopened is not None
    assert reopened.status == "open"
    assert reopened.channel_ref is None and reopened.posted_at is None
    assert reopened.deadline_at == db.to_iso(new_deadline)
    assert not db.reopen_question(ledger, question_id="q1"), "only expired rows reopen"
    assert answer(ledger, "q1")


@pytest.mark.parametrize(("prior", "expected"), [("open", True), ("answered", True)])
def test_supersede_from_open_or_answered(ledger: db.Ledger, prior: str, expected: bool) -> None:
    ask(ledger)
    if prior == "answered":
        answer(ledger)
    assert db.supersede_question(ledger, question_id="q1") is expected
    question = db.get_question(ledger, "q1")
    assert question is not None and question.status == "superseded"
    assert not db.supersede_question(ledger, question_id="q1")


def test_expired_cannot_be_answered_but_is_superseded_when_its_task_ends(
    ledger: db.Ledger,
) -> None:
    ask(ledger)
    db.expire_question(ledger, question_id="q1")
    assert not answer(ledger)
    question = db.get_question(ledger, "q1")
    assert question is not None and question.status == "expired"
    assert db.supersede_question(ledger, question_id="q1")
    assert not db.reopen_question(ledger, question_id="q1"), "a superseded question stays closed"
    question = db.get_question(ledger, "q1")
    assert question is not None and question.status == "superseded"


def test_list_questions_filters_and_keeps_ask_order(ledger: db.Ledger) -> None:
    ask(ledger, "b", thread_id="t1", turn=1)
    ask(ledger, "a", thread_id="t2", turn=1)
    ask(ledger, "c", thread_id="t1", turn=2)
    answer(ledger, "a")
    assert [q.question_id for q in db.list_questions(ledger)] == ["b", "a", "c"]
    assert [q.question_id for q in db.list_questions(ledger, status="open")] == ["b", "c"]
    assert [q.question_id for q in db.list_questions(ledger, thread_id="t1")] == ["b", "c"]
    assert [q.question_id for q in db.list_questions(ledger, status="answered")] == ["a"]
    with pytest.raises(LedgerInputError, match="question status"):
        db.list_questions(ledger, status="pending")


def test_overdue_questions_are_open_ones_past_their_deadline(ledger: db.Ledger) -> None:
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    ask(ledger, "past", deadline_at=now - timedelta(minutes=5))
    ask(ledger, "exact", turn=2, deadline_at=now)
    ask(ledger, "future", turn=3, deadline_at=now + timedelta(minutes=5))
    ask(ledger, "none", turn=4)
    ask(ledger, "answered-past", turn=5, deadline_at=now + timedelta(minutes=1))
    db.answer_question(
        ledger,
        question_id="answered-past",
        answer_json="{}",
        answered_via="cli",
        answered_at=now - timedelta(minutes=10),
    )
    later = now + timedelta(minutes=2)
    assert [q.question_id for q in db.overdue_questions(ledger, later)] == ["past", "exact"]


def test_answered_without_resume_lists_only_answers_missing_their_command(
    ledger: db.Ledger,
) -> None:
    db.create_task(ledger, task_id="task-1", kind="code", title="Live")
    db.set_task_status(ledger, "task-1", "waiting")
    ask(ledger, "q1")
    ask(ledger, "q2", turn=2)
    ask(ledger, "q3", turn=3)
    answer(ledger, "q1")
    answer(ledger, "q2")
    assert db.answered_without_resume(ledger) == []
    ledger.execute("DELETE FROM commands WHERE command_id = 'resume:q2'")  # a legacy ledger
    assert [q.question_id for q in db.answered_without_resume(ledger)] == ["q2"]


def test_answered_without_resume_skips_finished_and_unknown_tasks(ledger: db.Ledger) -> None:
    """A finished task waits on nothing: the retention pass deletes its done resume commands,
    and the sweep must not queue them again (a resume of a pruned task supersedes its answer)."""
    for task_id, status in (("t-done", "done"), ("t-failed", "failed"), ("t-parked", "parked")):
        db.create_task(ledger, task_id=task_id, kind="code", title=status)
        reason = "needs_operator" if status == "parked" else None
        db.set_task_status(ledger, task_id, status, parked_reason=reason)
        ask(ledger, f"{task_id}:q1", thread_id=task_id)
        answer(ledger, f"{task_id}:q1")
    ask(ledger, "orphan:q1", thread_id="orphan")
    answer(ledger, "orphan:q1")
    ledger.execute("DELETE FROM commands")

    assert [q.question_id for q in db.answered_without_resume(ledger)] == ["t-parked:q1"]
