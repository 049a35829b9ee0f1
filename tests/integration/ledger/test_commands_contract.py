"""Contract: the durable commands inbox with leased claims."""

from __future__ import annotations

import time

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInputError


def enqueue(conn: db.Ledger, command_id: str, task_id: str = "task-1") -> bool:
    return db.enqueue_command(
        conn, command_id=command_id, kind="start", task_id=task_id, payload={"n": command_id}
    )


def test_enqueue_is_idempotent_by_command_id(ledger: db.Ledger) -> None:
    assert enqueue(ledger, "c1")
    assert not db.enqueue_command(
        ledger, command_id="c1", kind="cancel", task_id="other", payload={"n": "changed"}
    )
    command = db.get_command(ledger, "c1")
    assert command is not None
    assert (command.kind, command.task_id, command.payload) == ("start", "task-1", {"n": "c1"})
    assert (command.state, command.attempts, command.claimed_by) == ("pending", 0, None)


def test_enqueue_refuses_bad_kind_and_unserialisable_payload(ledger: db.Ledger) -> None:
    with pytest.raises(LedgerInputError, match="command kind"):
        db.enqueue_command(ledger, command_id="c1", kind="explode", task_id="t", payload={})
    with pytest.raises(LedgerInputError, match="JSON"):
        db.enqueue_command(ledger, command_id="c1", kind="start", task_id="t", payload={"x": {1}})
    assert db.list_commands(ledger) == []


def test_claim_takes_oldest_first_up_to_the_limit(ledger: db.Ledger) -> None:
    for name in ("c1", "c2", "c3"):
        enqueue(ledger, name, task_id=f"task-{name}")
    first = db.claim_commands(ledger, consumer="w1", limit=2, lease_s=60)
    assert [c.command_id for c in first] == ["c1", "c2"]
    assert all(c.state == "claimed" and c.claimed_by == "w1" and c.attempts == 1 for c in first)
    assert all(c.lease_until is not None for c in first)
    second = db.claim_commands(ledger, consumer="w2", limit=5, lease_s=60)
    assert [c.command_id for c in second] == ["c3"]
    assert db.claim_commands(ledger, consumer="w3", limit=5, lease_s=60) == []


def test_a_task_claimed_by_one_consumer_waits_for_it(ledger: db.Ledger) -> None:
    enqueue(ledger, "a1", task_id="A")
    assert [
        c.command_id for c in db.claim_commands(ledger, consumer="w1", limit=1, lease_s=60)
    ] == ["a1"]
    enqueue(ledger, "a2", task_id="A")
    enqueue(ledger, "b1", task_id="B")

    other = db.claim_commands(ledger, consumer="w2", limit=5, lease_s=60)
    assert [c.command_id for c in other] == ["b1"], "A is held by w1"
    same = db.claim_runs(ledger, consumer="w1", limit=5, lease_s=60)
    assert [c.command.command_id for c in same] == ["a2"], "the holder may take its next command"

    assert db.complete_command(ledger, command_id="a1", consumer="w1")
    assert db.complete_command(ledger, command_id="a2", consumer="w1")
    enqueue(ledger, "a3", task_id="A")
    assert db.claim_commands(ledger, consumer="w2", limit=5, lease_s=60) == [], (
        "w1 still holds A's execution lease"
    )
    assert db.release_lease(ledger, same[0].fence)
    assert [
        c.command_id for c in db.claim_commands(ledger, consumer="w2", limit=5, lease_s=60)
    ] == ["a3"], "released once w1 gives the task up"


def test_a_dead_holders_task_is_claimable_when_its_lease_runs_out(
    ledger: db.Ledger,
) -> None:
    enqueue(ledger, "a1", task_id="A")
    enqueue(ledger, "a2", task_id="A")
    assert db.claim_commands(ledger, consumer="dead", limit=1, lease_s=0.001)
    deadline = time.monotonic() + 5
    taken: list[db.Command] = []
    while not taken and time.monotonic() < deadline:
        taken = db.claim_commands(ledger, consumer="alive", limit=5, lease_s=60)
    assert [c.command_id for c in taken] == ["a1", "a2"]


def test_claim_refuses_nonsense_limits(ledger: db.Ledger) -> None:
    with pytest.raises(LedgerInputError):
        db.claim_commands(ledger, consumer="w", limit=0, lease_s=1)
    with pytest.raises(LedgerInputError):
        db.claim_commands(ledger, consumer="w", limit=1, lease_s=0)


def test_an_expired_lease_is_claimable_again(ledger: db.Ledger) -> None:
    enqueue(ledger, "c1")
    assert db.claim_commands(ledger, consumer="dead", limit=1, lease_s=0.001)
    deadline = time.monotonic() + 10
    reclaimed: list[db.Command] = []
    while not reclaimed and time.monotonic() < deadline:
        reclaimed = db.claim_commands(ledger, consumer="alive", limit=1, lease_s=60)
    assert [c.command_id for c in reclaimed] == ["c1"]
    assert reclaimed[0].claimed_by == "alive"
    assert reclaimed[0].attempts == 2
    assert not db.complete_command(ledger, command_id="c1", consumer="dead")
    assert db.complete_command(ledger, command_id="c1", consumer="alive")


def test_complete_only_a_claimed_command(ledger: db.Ledger) -> None:
    enqueue(ledger, "c1")
    assert not db.complete_command(ledger, command_id="c1"), "pending is not claimed"
    db.claim_commands(ledger, consumer="w", limit=1, lease_s=60)
    assert db.complete_command(ledger, command_id="c1")
    done = db.get_command(ledger, "c1")
    assert done is not None
    assert done.state == "done" and done.done_at is not None and done.lease_until is None
    assert not db.complete_command(ledger, command_id="c1")
    assert db.claim_commands(ledger, consumer="w", limit=1, lease_s=60) == []
    assert not db.complete_command(ledger, command_id="unknown")


def test_fail_with_retry_returns_to_pending_and_keeps_the_error(
    ledger: db.Ledger,
) -> None:
    enqueue(ledger, "c1")
    db.claim_commands(ledger, consumer="w", limit=1, lease_s=60)
    assert db.fail_command(ledger, command_id="c1", error="model timed out", retry=True)
    command = db.get_command(ledger, "c1")
    assert command is not None
    assert (command.state, command.error, command.attempts) == ("pending", "model timed out", 1)
    assert command.claimed_by is None and command.done_at is None

    again = db.claim_commands(ledger, consumer="w", limit=1, lease_s=60)
    assert again[0].attempts == 2
    assert db.fail_command(ledger, command_id="c1", error="gave up", consumer="w")
    failed = db.get_command(ledger, "c1")
    assert failed is not None
    assert (failed.state, failed.error, failed.attempts) == ("failed", "gave up", 2)
    assert failed.done_at is not None
    assert db.claim_commands(ledger, consumer="w", limit=1, lease_s=60) == []


def test_list_commands_filters(ledger: db.Ledger) -> None:
    enqueue(ledger, "c1", "t1")
    enqueue(ledger, "c2", "t2")
    db.claim_commands(ledger, consumer="w", limit=1, lease_s=60)
    assert [c.command_id for c in db.list_commands(ledger, task_id="t2")] == ["c2"]
    assert [c.command_id for c in db.list_commands(ledger, state="claimed")] == ["c1"]
    with pytest.raises(LedgerInputError, match="command state"):
        db.list_commands(ledger, state="lost")
