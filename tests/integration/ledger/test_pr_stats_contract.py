"""Contract: `pull_request_stats`, what `/metrics` reads of the pull requests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent_team import db

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def _pull(ledger: db.Ledger, task_id: str, number: int, opened_s: float) -> None:
    db.watch_pull_request(
        ledger,
        task_id=task_id,
        repo="acme/app",
        number=number,
        url=f"https://github.com/acme/app/pull/{number}",
        head_sha=None,
        at=T0 + timedelta(seconds=opened_s),
    )


def test_no_pull_requests(ledger: db.Ledger) -> None:
    assert db.pull_request_stats(ledger) == db.PullRequestStats(by_state={}, finished=())


def test_counts_per_state_and_the_finished_ones_oldest_first(ledger: db.Ledger) -> None:
    _pull(ledger, "t1", 1, 0)
    _pull(ledger, "t2", 2, 60)
    _pull(ledger, "t3", 3, 120)
    _pull(ledger, "t4", 4, 180)
    end = T0 + timedelta(hours=1)
    assert db.note_pull_request(ledger, "t2", state="merged", rounds=2, closed_at=end)
    assert db.note_pull_request(ledger, "t1", state="closed", closed_at=end)
    assert db.note_pull_request(ledger, "t3", rounds=1)  # still open: not finished
    stats = db.pull_request_stats(ledger)
    assert stats.by_state == {"open": 2, "merged": 1, "closed": 1}
    assert stats.finished == (
        db.FinishedPull("closed", 0, db.to_iso(T0), db.to_iso(end)),
        db.FinishedPull("merged", 2, db.to_iso(T0 + timedelta(seconds=60)), db.to_iso(end)),
    )
