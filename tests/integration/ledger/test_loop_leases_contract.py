"""Singleton loops: one instance at a time makes a loop's passes, and the loop moves on when
its holder stops or dies; what `/metrics` reads of the leases."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from agent_team import db
from agent_team.coordinator.loop_lease import LoopLease
from agent_team.exceptions import LedgerStorageError
from tests.integration.ledger.test_races import race


def loop_lease(
    ledger: db.Ledger, owner: str, *, every_s: float = 5, lease_s: float = 30
) -> LoopLease:
    return LoopLease(ledger, "timers", owner=owner, every_s=every_s, lease_s=lease_s)


def test_one_instance_makes_the_passes_while_it_keeps_asking(ledger: db.Ledger) -> None:
    a, b = loop_lease(ledger, "a"), loop_lease(ledger, "b")
    assert a.turn() and a.held
    for _ in range(3):
        assert not b.turn() and not b.held
        assert a.turn(), "the holder keeps it"
    lease = db.get_lease(ledger, "loop:timers")
    assert lease is not None and (lease.owner, lease.epoch, lease.takeovers) == ("a", 1, 0)


def test_a_clean_stop_hands_the_loop_over_at_once(ledger: db.Ledger) -> None:
    a, b = loop_lease(ledger, "a"), loop_lease(ledger, "b")
    assert a.turn() and not b.turn()
    a.release()
    assert not a.held
    assert b.turn(), "the next instance to ask takes it, without waiting for the lease"
    assert not a.turn()
    lease = db.get_lease(ledger, "loop:timers")
    assert lease is not None and (lease.owner, lease.epoch, lease.takeovers) == ("b", 2, 0)
    b.release()
    b.release()  # twice is harmless


def test_a_holder_that_stops_asking_loses_the_loop_after_its_interval_and_lease(
    ledger: db.Ledger,
) -> None:
    a = loop_lease(ledger, "a", every_s=0.2, lease_s=0.2)
    b = loop_lease(ledger, "b", every_s=0.2, lease_s=0.2)
    assert a.turn()
    asked = time.monotonic()  # a dies here: it never asks again
    while not b.turn():
        assert time.monotonic() - asked < 10, "the loop never moved on"
        time.sleep(0.02)
    assert time.monotonic() - asked >= 0.35, "taken before the holder's time ran out"
    assert not a.turn(), "the old holder finds it taken"
    summary = db.lease_summary(ledger)
    assert summary.takeovers_by_kind == {"loop": 1}


def test_racing_instances_get_one_turn_between_them(ledger: db.Ledger) -> None:
    leases = [loop_lease(ledger, f"i{n}") for n in range(8)]
    turns = race(8, lambda n: leases[n].turn())
    assert turns.count(True) == 1
    holder = leases[turns.index(True)]
    assert [lease.held for lease in leases].count(True) == 1 and holder.held


def test_a_ledger_out_of_reach_means_no_pass_here(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = loop_lease(ledger, "a")
    assert a.turn()

    def away(*_args: object, **_kwargs: object) -> None:
        raise LedgerStorageError("the ledger is away")

    monkeypatch.setattr(db, "acquire_lease", away)
    assert not a.turn() and not a.held, "no pass while its lease cannot be renewed"
    monkeypatch.undo()
    assert a.turn(), "back: the lease is still this instance's"


def test_lease_summary_counts_live_task_leases_per_instance_and_takeovers_per_kind(
    ledger: db.Ledger,
) -> None:
    now = db.utc_now()
    for task, owner in (("t1", "a"), ("t2", "a"), ("t3", "b")):
        assert db.acquire_lease(ledger, name=db.task_lease_name(task), owner=owner, lease_s=60)
    lapsed = now - timedelta(seconds=600)
    assert db.acquire_lease(ledger, name="task:t4", owner="c", lease_s=1, now=lapsed)
    done = db.acquire_lease(ledger, name="task:t5", owner="b", lease_s=60)
    assert done is not None and db.release_lease(ledger, done)
    assert db.acquire_lease(ledger, name="loop:timers", owner="a", lease_s=60)

    summary = db.lease_summary(ledger, now=now)
    assert summary.running_by_owner == {"a": 2, "b": 1}, "lapsed and released leases run nothing"
    assert summary.takeovers_by_kind == {"task": 0, "loop": 0}

    later = now + timedelta(seconds=120)  # a died: b takes t1 over
    assert db.acquire_lease(ledger, name="task:t1", owner="b", lease_s=60, now=later)
    summary = db.lease_summary(ledger, now=later + timedelta(seconds=30))
    assert summary.running_by_owner == {"b": 1}
    assert summary.takeovers_by_kind == {"task": 1, "loop": 0}
