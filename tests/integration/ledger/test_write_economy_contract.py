"""The hot path writes only what changes, in as few commits as it can, on every backend.

Each write transaction is a commit the disk must flush (an fsync on SQLite);
what these tests pin down is which calls take none, which share one, and that
history-only commits (`flush=False`) are still whole transactions while the
next commit on the same connection flushes again.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInputError
from tests.integration.ledger.helpers import counted_writes


def _task(ledger: db.Ledger, task_id: str = "t1", *, start: bool = True) -> None:
    db.create_task(
        ledger,
        task_id=task_id,
        kind="code",
        title="Economy",
        start=db.StartCommand(f"start:{task_id}") if start else None,
    )


def test_a_claim_pass_that_finds_nothing_writes_nothing(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    with counted_writes(ledger, monkeypatch) as flushes:
        assert db.claim_runs(ledger, consumer="me", limit=4, lease_s=30) == []
    assert flushes == []
    _task(ledger)
    with counted_writes(ledger, monkeypatch) as flushes:
        (claim,) = db.claim_runs(ledger, consumer="me", limit=4, lease_s=30)
        assert db.claim_runs(ledger, consumer="other", limit=4, lease_s=30) == []
    assert flushes == [True]  # the claim; the other consumer's empty pass wrote nothing
    assert claim.command.command_id == "start:t1"


def test_a_task_and_its_start_command_are_one_commit(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    with counted_writes(ledger, monkeypatch) as flushes:
        _task(ledger)
    assert flushes == [True]
    assert [c.command_id for c in db.list_commands(ledger, task_id="t1")] == ["start:t1"]
    # A submit retried after a crash that lost the command queues it; nothing else changes.
    _task(ledger, "t2", start=False)
    assert db.list_commands(ledger, task_id="t2") == []
    _task(ledger, "t2")
    assert [c.command_id for c in db.list_commands(ledger, task_id="t2")] == ["start:t2"]
    _task(ledger, "t2")
    assert len(db.list_commands(ledger, task_id="t2")) == 1


def test_asking_a_question_again_writes_nothing(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _task(ledger)
    ask: dict[str, Any] = {
        "question_id": "t1:q1",
        "thread_id": "t1",
        "turn": 1,
        "kind": "plan_decision",
        "transport": "local",
        "deadline_at": None,
        "payload_json": "{}",
    }
    with counted_writes(ledger, monkeypatch) as flushes:
        assert db.ensure_question(ledger, **ask) is True
        assert db.ensure_question(ledger, **ask) is False
    assert flushes == [False]  # the gate's checkpoint, flushed, follows in the same step


def test_completing_the_last_command_gives_the_lease_up_in_the_same_commit(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _task(ledger)
    (claim,) = db.claim_runs(ledger, consumer="me", limit=1, lease_s=30)
    with counted_writes(ledger, monkeypatch) as flushes:
        assert db.complete_command(
            ledger, command_id=claim.command.command_id, consumer="me", release=claim.fence
        )
    assert flushes == [True]
    lease = db.get_lease(ledger, db.task_lease_name("t1"))
    assert lease is not None and lease.owner is None
    assert db.get_command(ledger, "start:t1").state == "done"  # type: ignore[union-attr]


def test_a_lost_claim_releases_nothing(ledger: db.Ledger) -> None:
    _task(ledger)
    (claim,) = db.claim_runs(ledger, consumer="me", limit=1, lease_s=30)
    assert not db.complete_command(
        ledger, command_id=claim.command.command_id, consumer="someone else", release=claim.fence
    )
    lease = db.get_lease(ledger, db.task_lease_name("t1"))
    assert lease is not None and lease.owner == "me"


def test_ending_a_task_is_one_commit_that_closes_everything(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _task(ledger)
    db.enter_phase(ledger, task_id="t1", phase="plan_review", status="waiting")
    db.ensure_question(
        ledger,
        question_id="t1:q1",
        thread_id="t1",
        turn=1,
        kind="plan_decision",
        transport="local",
        deadline_at=None,
        payload_json="{}",
    )
    with counted_writes(ledger, monkeypatch) as flushes:
        db.finish_task(ledger, task_id="t1", status="cancelled", phase="done", note="by hand")
    assert flushes == [False]  # the run's command, done with a flush, follows at once
    task = db.get_task(ledger, "t1")
    assert task is not None and (task.status, task.phase) == ("cancelled", "done")
    (row,) = db.list_transitions(ledger, "t1")
    assert row.exited_at is not None and (row.status, row.note) == ("cancelled", "by hand")
    assert db.get_question(ledger, "t1:q1").status == "superseded"  # type: ignore[union-attr]


def test_finish_task_takes_only_an_end(ledger: db.Ledger) -> None:
    _task(ledger)
    with pytest.raises(LedgerInputError):
        db.finish_task(ledger, task_id="t1", status="running", phase=None, note=None)


def test_phase_entries_are_history_commits_and_the_next_commit_flushes_again(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _task(ledger)
    with counted_writes(ledger, monkeypatch) as flushes:
        db.enter_phase(ledger, task_id="t1", phase="intake", status="running")
    assert flushes == [False]
    if ledger.dialect.name == "sqlite":
        probe, deferred = "PRAGMA synchronous", (1,)  # NORMAL; the ledger's own is FULL (2)
    else:
        probe, deferred = "SHOW synchronous_commit", ("off",)
    before = ledger.write(lambda tx: tuple(tx.execute(probe).fetchone()))
    inside = ledger.write(lambda tx: tuple(tx.execute(probe).fetchone()), flush=False)
    after = ledger.write(lambda tx: tuple(tx.execute(probe).fetchone()))
    assert inside == deferred
    assert after == before  # the connection flushes again as it did
    if ledger.dialect.name == "sqlite":
        assert before == (2,)
    task = db.get_task(ledger, "t1")
    assert task is not None and (task.status, task.phase) == ("running", "intake")
