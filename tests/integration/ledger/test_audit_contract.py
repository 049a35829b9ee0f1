"""The audit log: one row per change, in the change's transaction, hash-chained and verifiable."""

from __future__ import annotations

import pytest

from agent_team import db
from agent_team.db import audit as audit_module
from agent_team.exceptions import LedgerInputError, LedgerStorageError
from tests.integration.ledger.helpers import ask
from tests.integration.ledger.test_races import race


def entry(n: int = 0, action: str = "answer") -> db.AuditEntry:
    return db.AuditEntry(f"user{n}", "cli", action, f"t{n}:q1", {"n": n, "text": "é ✓"})


def append(ledger: db.Ledger, n: int = 0, action: str = "answer") -> str:
    return ledger.write(lambda tx: db.append_audit(tx, entry(n, action)))


def test_rows_chain_from_the_genesis_hash_and_verify(ledger: db.Ledger) -> None:
    assert db.verify_audit(ledger) == db.AuditVerdict(0)
    hashes = [append(ledger, n) for n in range(5)]
    rows = list(reversed(db.list_audit(ledger)))
    assert [row.hash for row in rows] == hashes
    assert rows[0].prev_hash == db.GENESIS_HASH
    assert [row.prev_hash for row in rows[1:]] == hashes[:-1]
    assert rows[2].detail_dict == {"n": 2, "text": "é ✓"}
    verdict = db.verify_audit(ledger)
    assert verdict.ok and verdict.rows == 5


@pytest.mark.parametrize(
    ("column", "value"),
    [("actor", "mallory"), ("detail", '{"n":2}'), ("at", "2020-01-01T00:00:00.000000Z")],
)
def test_a_row_changed_by_hand_fails_verify_at_that_row(
    ledger: db.Ledger, column: str, value: str
) -> None:
    for n in range(5):
        append(ledger, n)
    third = sorted(row.seq for row in db.list_audit(ledger))[2]
    ledger.write(
        lambda tx: tx.execute(f"UPDATE audit_log SET {column} = ? WHERE seq = ?", (value, third))
    )
    verdict = db.verify_audit(ledger)
    assert not verdict.ok and verdict.broken_seq == third
    assert verdict.rows == 2 and "changed after it was written" in (verdict.problem or "")


def test_a_row_removed_from_the_middle_or_the_end_is_found(ledger: db.Ledger) -> None:
    for n in range(5):
        append(ledger, n)
    seqs = sorted(row.seq for row in db.list_audit(ledger))
    ledger.write(lambda tx: tx.execute("DELETE FROM audit_log WHERE seq = ?", (seqs[-1],)))
    tail = db.verify_audit(ledger)
    assert not tail.ok and "removed from the end" in (tail.problem or "") and tail.rows == 4
    ledger.write(lambda tx: tx.execute("DELETE FROM audit_log WHERE seq = ?", (seqs[1],)))
    middle = db.verify_audit(ledger)
    assert not middle.ok and middle.broken_seq == seqs[2]
    assert "does not follow" in (middle.problem or "")


def test_an_audit_row_that_cannot_be_written_rolls_the_change_back(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ask(ledger, "q1", thread_id="t1")

    def broken(*_args: object, **_kwargs: object) -> str:
        raise LedgerStorageError("disk full while writing the audit row")

    monkeypatch.setattr(audit_module, "append_audit", broken)
    monkeypatch.setattr("agent_team.db.questions.append_audit", broken)
    with pytest.raises(LedgerStorageError, match="disk full"):
        db.answer_question(
            ledger,
            question_id="q1",
            answer_json='"approve"',
            answered_via="cli:ada",
            audit=db.AuditEntry("ada", "cli", "answer", "q1"),
        )
    question = db.get_question(ledger, "q1")
    assert question is not None and question.status == "open", "the answer was not stored"
    assert db.get_command(ledger, db.resume_command_id("q1")) is None
    assert db.list_audit(ledger) == []


def test_a_lost_compare_and_set_writes_no_audit_row(ledger: db.Ledger) -> None:
    ask(ledger, "q1", thread_id="t1")
    answers = race(
        8,
        lambda n: db.answer_question(
            ledger,
            question_id="q1",
            answer_json='"approve"',
            answered_via=f"slack:U{n}",
            audit=db.AuditEntry(f"U{n}", "slack", "answer", "q1"),
        ),
    )
    assert answers.count(True) == 1
    (row,) = db.list_audit(ledger)
    assert row.via == "slack" and row.actor.startswith("U") and row.action == "answer"
    assert db.verify_audit(ledger).ok


def test_concurrent_appends_form_one_chain(ledger: db.Ledger) -> None:
    race(8, lambda n: append(ledger, n))
    verdict = db.verify_audit(ledger)
    assert verdict.ok and verdict.rows == 8


def test_filters_and_bad_entries(ledger: db.Ledger) -> None:
    append(ledger, 1, "answer")
    append(ledger, 2, "automation.create")
    append(ledger, 2, "automation.pause")
    assert [r.action for r in db.list_audit(ledger, action="automation.")] == [
        "automation.pause",
        "automation.create",
    ]
    assert [r.actor for r in db.list_audit(ledger, actor="user1")] == ["user1"]
    assert len(db.list_audit(ledger, target="t2:q1", limit=1)) == 1
    newest = db.list_audit(ledger)[0]
    assert len(db.list_audit(ledger, before_seq=newest.seq)) == 2
    with pytest.raises(LedgerInputError, match="actor"):
        db.AuditEntry("", "cli", "answer", "q1")
    with pytest.raises(LedgerInputError, match="limit"):
        db.list_audit(ledger, limit=0)


def test_reopen_is_one_transaction_with_its_task_and_its_audit_row(ledger: db.Ledger) -> None:
    db.create_task(ledger, task_id="t1", kind="code", title="Stuck")
    ask(ledger, "t1:q1", thread_id="t1")
    assert db.expire_question(ledger, question_id="t1:q1")
    db.set_task_status(
        ledger, "t1", "parked", phase="plan_review", parked_reason="question_expired"
    )
    later = db.utc_now()

    assert db.reopen_for_task(
        ledger,
        question_id="t1:q1",
        deadline_at=later,
        note="question t1:q1 reopened",
        audit=db.AuditEntry("ada", "cli", "reopen", "t1:q1"),
    )
    question, task = db.get_question(ledger, "t1:q1"), db.get_task(ledger, "t1")
    assert question is not None and question.status == "open" and question.channel_ref is None
    assert task is not None and (task.status, task.parked_reason) == ("waiting", None)
    (row,) = db.list_transitions(ledger, "t1")
    assert (row.to_phase, row.status, row.note) == (
        "plan_review",
        "waiting",
        "question t1:q1 reopened",
    )
    assert [r.action for r in db.list_audit(ledger)] == ["reopen"]
    assert not db.reopen_for_task(
        ledger, question_id="t1:q1", deadline_at=later, note="again", audit=entry()
    ), "only an expired question reopens"
    assert len(db.list_audit(ledger)) == 1 and len(db.list_transitions(ledger, "t1")) == 1
