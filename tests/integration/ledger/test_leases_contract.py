"""Execution leases and fencing epochs: one holder at a time; a stale holder's writes refused."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest

from agent_team import db
from agent_team.exceptions import FencedError, LedgerInputError
from tests.integration.ledger.helpers import ask
from tests.integration.ledger.test_races import race

LATER = timedelta(seconds=120)


def test_a_free_lease_is_taken_at_epoch_1_and_refused_to_others_while_live(
    ledger: db.Ledger,
) -> None:
    fence = db.acquire_lease(ledger, name="task:t", owner="a", lease_s=60)
    assert fence == db.Fence("task:t", "a", 1)
    assert db.acquire_lease(ledger, name="task:t", owner="b", lease_s=60) is None
    again = db.acquire_lease(ledger, name="task:t", owner="a", lease_s=60)
    assert again == fence, "the holder renews without a new epoch"


def test_a_lapsed_lease_is_taken_over_with_the_next_epoch(ledger: db.Ledger) -> None:
    db.acquire_lease(ledger, name="task:t", owner="a", lease_s=60)
    later = db.utc_now() + LATER
    taken = db.acquire_lease(ledger, name="task:t", owner="b", lease_s=60, now=later)
    assert taken == db.Fence("task:t", "b", 2)
    lease = db.get_lease(ledger, "task:t")
    assert lease is not None and lease.owner == "b" and lease.takeovers == 1


def test_release_keeps_the_epoch_so_the_next_holder_is_higher(ledger: db.Ledger) -> None:
    first = db.acquire_lease(ledger, name="loop:deadlines", owner="a", lease_s=60)
    assert first is not None and db.release_lease(ledger, first)
    assert not db.release_lease(ledger, first), "released twice"
    second = db.acquire_lease(ledger, name="loop:deadlines", owner="b", lease_s=60)
    assert second == db.Fence("loop:deadlines", "b", 2)
    lease = db.get_lease(ledger, "loop:deadlines")
    assert lease is not None and lease.takeovers == 0, "a release is not a takeover"


def test_a_fenced_write_is_refused_after_a_takeover_and_stores_nothing(
    ledger: db.Ledger,
) -> None:
    old = db.acquire_lease(ledger, name="task:t", owner="a", lease_s=60)
    assert old is not None
    with db.fenced(old):
        assert ask(ledger, "q1", thread_id="t")
    new = db.acquire_lease(ledger, name="task:t", owner="b", lease_s=60, now=db.utc_now() + LATER)
    assert new is not None and new.epoch == old.epoch + 1
    refused_before = db.fence_counters.refused
    with db.fenced(old), pytest.raises(FencedError, match="held by b"):
        ask(ledger, "q2", thread_id="t", turn=2)
    assert db.fence_counters.refused == refused_before + 1
    assert db.get_question(ledger, "q2") is None
    with db.fenced(new):
        assert ask(ledger, "q2", thread_id="t", turn=2)
    assert ask(ledger, "q3", thread_id="t", turn=3), "writes outside any run are not fenced"


def test_transitions_keep_the_epoch_they_were_written_under(ledger: db.Ledger) -> None:
    fence = db.acquire_lease(ledger, name="task:t", owner="a", lease_s=60)
    assert fence is not None
    db.record_transition(ledger, thread_id="t", to_phase="intake", status="running")
    with db.fenced(fence):
        db.record_transition(ledger, thread_id="t", to_phase="clarify", status="running")
    assert [row.epoch for row in db.list_transitions(ledger, "t")] == [None, 1]


def test_renewal_keeps_held_leases_and_reports_lost_ones(ledger: db.Ledger) -> None:
    a1 = db.acquire_lease(ledger, name="task:1", owner="a", lease_s=60)
    a2 = db.acquire_lease(ledger, name="task:2", owner="a", lease_s=60)
    assert a1 is not None and a2 is not None
    db.acquire_lease(ledger, name="task:2", owner="b", lease_s=60, now=db.utc_now() + LATER)
    assert db.renew_leases(ledger, [a1, a2], lease_s=60) == {"task:1"}
    assert db.renew_leases(ledger, [], lease_s=60) == set()


def test_claim_runs_takes_the_tasks_lease_with_the_command(ledger: db.Ledger) -> None:
    db.enqueue_command(ledger, command_id="c1", kind="start", task_id="t1")
    (claim,) = db.claim_runs(ledger, consumer="a", limit=5, lease_s=60)
    assert claim.command.command_id == "c1" and claim.fence == db.Fence("task:t1", "a", 1)
    db.enqueue_command(ledger, command_id="c2", kind="resume", task_id="t1")
    assert db.claim_runs(ledger, consumer="b", limit=5, lease_s=60) == [], "t1 is a's"
    assert db.list_leases(ledger, owner="a", prefix="task:")[0].name == "task:t1"
    assert db.list_leases(ledger, prefix="loop:") == []


def test_a_dead_holders_command_and_lease_are_taken_over_after_they_lapse(
    ledger: db.Ledger,
) -> None:
    db.enqueue_command(ledger, command_id="c1", kind="start", task_id="t1")
    (first,) = db.claim_runs(ledger, consumer="a", limit=5, lease_s=0.2)
    deadline = db.utc_now() + timedelta(seconds=10)
    taken: list[db.Claim] = []
    while not taken and db.utc_now() < deadline:
        taken = db.claim_runs(ledger, consumer="b", limit=5, lease_s=60)
    (second,) = taken
    assert second.command.command_id == "c1" and second.command.attempts == 2
    assert second.fence.epoch == first.fence.epoch + 1
    with db.fenced(first.fence), pytest.raises(FencedError):
        db.complete_command(ledger, command_id="c1", consumer="a")
    with db.fenced(second.fence):
        assert db.complete_command(ledger, command_id="c1", consumer="b")


def test_racing_claimers_never_hold_one_task_at_once(ledger: db.Ledger) -> None:
    for n in range(40):
        db.enqueue_command(ledger, command_id=f"c{n:02}", kind="resume", task_id=f"t{n % 5}")
    batches = race(8, lambda i: db.claim_runs(ledger, consumer=f"w{i}", limit=40, lease_s=60))
    owners: dict[str, set[str]] = {}
    for batch in batches:
        for claim in batch:
            owners.setdefault(claim.command.task_id, set()).add(claim.fence.owner)
            assert claim.fence.owner == claim.command.claimed_by
    assert all(len(held) == 1 for held in owners.values()), owners
    assert sorted(owners) == [f"t{n}" for n in range(5)]


def test_racing_takeovers_have_one_winner_per_epoch(ledger: db.Ledger) -> None:
    db.acquire_lease(ledger, name="task:t", owner="a", lease_s=60)
    later = db.utc_now() + LATER
    won = race(
        16, lambda i: db.acquire_lease(ledger, name="task:t", owner=f"w{i}", lease_s=60, now=later)
    )
    winners = [fence for fence in won if fence is not None]
    assert len(winners) == 1 and winners[0].epoch == 2


def test_a_stale_writer_racing_a_takeover_never_commits_after_it(ledger: db.Ledger) -> None:
    """A writer under the old epoch keeps writing while another instance takes over."""
    old = db.acquire_lease(ledger, name="task:t", owner="a", lease_s=60)
    assert old is not None
    stop = threading.Event()
    outcomes: Counter[str] = Counter()

    def stale_writer() -> None:
        with db.fenced(old):
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    db.enqueue_command(ledger, command_id=f"old-{n}", kind="start", task_id="t")
                    outcomes["stored"] += 1
                except FencedError:
                    outcomes["refused"] += 1
                    return

    writer = threading.Thread(target=stale_writer)
    writer.start()
    try:
        deadline = db.utc_now() + timedelta(seconds=10)
        while outcomes["stored"] < 3 and db.utc_now() < deadline:
            threading.Event().wait(0.01)
        new = db.acquire_lease(
            ledger, name="task:t", owner="b", lease_s=60, now=db.utc_now() + LATER
        )
        assert new is not None
        with db.fenced(new):
            db.enqueue_command(ledger, command_id="new-1", kind="start", task_id="t")
        writer.join(timeout=10)
    finally:
        stop.set()
        writer.join(timeout=10)
    assert outcomes["refused"] == 1 and outcomes["stored"] >= 3
    commands = db.list_commands(ledger, task_id="t")
    ids = [c.command_id for c in commands]
    # Nothing of the old epoch was committed after the takeover's first write.
    assert ids[-1] == "new-1" and ids.count("new-1") == 1
    assert len(ids) == outcomes["stored"] + 1


def test_a_lease_needs_a_positive_duration(ledger: db.Ledger) -> None:
    with pytest.raises(LedgerInputError, match="positive"):
        db.acquire_lease(ledger, name="task:t", owner="a", lease_s=0)
