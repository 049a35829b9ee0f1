"""Contract: the daemons on a ledger (v18 `daemons`), and what `reports.daemons` makes of them.

A daemon writes its row at start, a heartbeat while it runs and a mark when it
stops cleanly; a reader calls it `up`, `gone` (not seen for its own lease
time) or `stopped`, with the loops and tasks its live leases say it holds.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInputError
from agent_team.reports.daemons import daemons_report
from tests.integration.ledger.helpers import counted_writes
from tests.integration.ledger.test_races import race

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LEASE_S = 30.0


def daemon(n: int = 1, *, lease_s: float = LEASE_S, at: datetime = T0) -> db.DaemonStart:
    return db.DaemonStart(
        instance_id=f"host-{n}:{100 + n}:20261201T120000.00000{n}Z",
        host=f"host-{n}",
        pid=100 + n,
        version="1.2.3",
        url=f"http://host-{n}:8080/",
        lease_s=lease_s,
        started_at=at,
    )


def statuses(ledger: db.Ledger, now: datetime) -> dict[str, str]:
    with ledger.snapshot() as view:
        report = daemons_report(view, now)
    return {view.host: view.status for view in report.daemons}


def test_a_registered_daemon_is_listed_with_what_it_said(ledger: db.Ledger) -> None:
    me = daemon()
    db.register_daemon(ledger, me, now=T0 + timedelta(seconds=1))

    (row,) = db.list_daemons(ledger)

    assert row == db.DaemonRow(
        instance_id=me.instance_id,
        host="host-1",
        pid=101,
        version="1.2.3",
        url="http://host-1:8080/",
        lease_s=LEASE_S,
        started_at=db.to_iso(T0),
        last_seen_at=db.to_iso(T0 + timedelta(seconds=1)),
        stopped_at=None,
    )


def test_up_until_not_seen_for_its_own_lease_time_then_gone(ledger: db.Ledger) -> None:
    db.register_daemon(ledger, daemon(1, lease_s=30), now=T0)
    db.register_daemon(ledger, daemon(2, lease_s=300), now=T0)

    assert statuses(ledger, T0 + timedelta(seconds=30)) == {"host-1": "up", "host-2": "up"}
    later = T0 + timedelta(seconds=31)
    assert statuses(ledger, later) == {"host-2": "up", "host-1": "gone"}  # up first

    assert db.daemon_heartbeat(ledger, daemon(1, lease_s=30), now=later)
    assert statuses(ledger, later + timedelta(seconds=29)) == {"host-1": "up", "host-2": "up"}


def test_a_clean_stop_is_stopped_for_good(ledger: db.Ledger) -> None:
    me = daemon()
    db.register_daemon(ledger, me, now=T0)
    stop = T0 + timedelta(seconds=5)

    assert db.daemon_stopped(ledger, me.instance_id, now=stop)
    assert not db.daemon_stopped(ledger, me.instance_id, now=stop + timedelta(seconds=1))
    # A heartbeat that was under way when the daemon stopped changes nothing.
    assert not db.daemon_heartbeat(ledger, me, now=stop + timedelta(seconds=2))

    (row,) = db.list_daemons(ledger)
    assert row.stopped_at == row.last_seen_at == db.to_iso(stop)
    assert statuses(ledger, stop + timedelta(days=1)) == {"host-1": "stopped"}
    assert not db.daemon_stopped(ledger, "nobody:1:x", now=stop)


def test_the_report_shows_the_live_leases_each_daemon_holds(ledger: db.Ledger) -> None:
    one, two = daemon(1), daemon(2)
    now = db.utc_now()
    for each in (one, two):
        db.register_daemon(ledger, each, now=now)
    db.create_task(ledger, task_id="t1", kind="code", title="Runs", start=db.StartCommand("s1"))
    (claim,) = db.claim_runs(ledger, consumer=one.instance_id, limit=1, lease_s=60)
    assert claim.fence.name == "task:t1"
    assert db.acquire_lease(ledger, name="loop:timers", owner=two.instance_id, lease_s=60)
    assert db.acquire_lease(ledger, name="loop:github-poller", owner=two.instance_id, lease_s=60)
    lapsed = db.acquire_lease(
        ledger, name="loop:slack-digest", owner=one.instance_id, lease_s=1, now=now
    )
    assert lapsed is not None
    released = db.acquire_lease(ledger, name="task:t-old", owner=two.instance_id, lease_s=60)
    assert released is not None and db.release_lease(ledger, released)

    with ledger.snapshot() as view:
        report = daemons_report(view, now + timedelta(seconds=2))

    held = {view.host: (view.loops, view.tasks) for view in report.daemons}
    assert held == {"host-1": ((), ("t1",)), "host-2": (("github-poller", "timers"), ())}
    body = report.to_json()
    assert body["counts"] == {"up": 2, "gone": 0, "stopped": 0}
    assert body["daemons"][0]["tasks"] == ["t1"]
    assert body["daemons"][0]["seen_s_ago"] == 2.0


def test_a_heartbeat_is_one_history_commit_and_writes_a_missing_row_again(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    me = daemon()
    with counted_writes(ledger, monkeypatch) as flushes:
        db.register_daemon(ledger, me, now=T0)
        assert db.daemon_heartbeat(ledger, me, now=T0 + timedelta(seconds=10))
        assert db.daemon_stopped(ledger, me.instance_id, now=T0 + timedelta(seconds=20))
    assert flushes == [False, False, False]  # never waits for the disk

    # The row went (the retention pass after a long stall): the next heartbeat writes it.
    other = daemon(2)
    db.register_daemon(ledger, other, now=T0)
    assert db.prune_daemons(ledger, older_than=T0 + timedelta(seconds=1)) == 1
    assert [row.instance_id for row in db.list_daemons(ledger)] == [me.instance_id]
    assert db.daemon_heartbeat(ledger, other, now=T0 + timedelta(seconds=3))
    (row,) = [row for row in db.list_daemons(ledger) if row.host == "host-2"]
    assert (row.started_at, row.last_seen_at) == (
        db.to_iso(T0),
        db.to_iso(T0 + timedelta(seconds=3)),
    )


def test_pruning_forgets_only_daemons_not_seen_since_the_cut(ledger: db.Ledger) -> None:
    db.register_daemon(ledger, daemon(1), now=T0)
    db.register_daemon(ledger, daemon(2), now=T0)
    db.daemon_stopped(ledger, daemon(2).instance_id, now=T0 + timedelta(days=2))
    db.register_daemon(ledger, daemon(3), now=T0 + timedelta(days=3))

    gone = db.prune_daemons(ledger, older_than=T0 + timedelta(days=1))

    assert gone == 1
    assert [row.host for row in db.list_daemons(ledger)] == ["host-2", "host-3"]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"instance_id": ""}, "instance_id"),
        ({"host": "h" * 501}, "host"),
        ({"version": ""}, "version"),
        ({"url": "u" * 501}, "url"),
        ({"pid": -1}, "pid"),
        ({"lease_s": 0.0}, "lease_s"),
    ],
)
def test_a_bad_field_is_refused_and_nothing_is_stored(
    ledger: db.Ledger, change: dict[str, object], match: str
) -> None:
    bad = dataclasses.replace(daemon(), **change)  # type: ignore[arg-type]
    with pytest.raises(LedgerInputError, match=match):
        db.register_daemon(ledger, bad, now=T0)
    assert db.list_daemons(ledger) == []


def test_many_daemons_starting_and_beating_together_each_keep_their_row(
    ledger: db.Ledger,
) -> None:
    def life(n: int) -> bool:
        me = daemon(n)
        db.register_daemon(ledger, me, now=T0)
        return db.daemon_heartbeat(ledger, me, now=T0 + timedelta(seconds=n))

    assert race(8, life) == [True] * 8

    rows = db.list_daemons(ledger)
    assert sorted(row.pid for row in rows) == [100 + n for n in range(8)]
    assert {row.host: row.last_seen_at for row in rows} == {
        f"host-{n}": db.to_iso(T0 + timedelta(seconds=n)) for n in range(8)
    }
