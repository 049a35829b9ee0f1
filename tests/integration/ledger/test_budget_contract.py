"""Contract: the budget ledger, its day buckets, and the outbox that never loses a row."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInputError

DAY = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)


def spend(conn: db.Ledger, **overrides: object) -> bool:
    values: dict[str, object] = {
        "thread_id": "t1",
        "stage": "plan",
        "model": "anthropic:claude-sonnet",
        "billing_mode": "api",
        "input_tokens": 1000,
        "output_tokens": 200,
        "usd_cost": 0.006,
        "recorded_at": DAY,
    }
    values.update(overrides)
    return db.record_usage(conn, **values)  # type: ignore[arg-type]


@contextmanager
def budget_table_missing(conn: db.Ledger) -> Iterator[None]:
    """Make every budget write fail for real (no such table), then put the table back."""
    conn.execute("ALTER TABLE budget_ledger RENAME TO budget_ledger_away")
    try:
        yield
    finally:
        conn.execute("ALTER TABLE budget_ledger_away RENAME TO budget_ledger")


def test_spent_tokens_and_summary_per_day_and_mode(ledger: db.Ledger) -> None:
    assert spend(ledger)
    assert spend(ledger, stage="build", usd_cost=0.5, input_tokens=10, output_tokens=5)
    assert spend(ledger, billing_mode="subscription", model="claude-code", usd_cost=0.0)
    assert spend(ledger, recorded_at=DAY + timedelta(days=1), usd_cost=9.0)

    assert db.spent(ledger, day="2026-12-01") == pytest.approx(0.506)
    assert db.spent(ledger, day="2026-12-01", billing_mode="api") == pytest.approx(0.506)
    assert db.spent(ledger, day="2026-12-01", billing_mode="subscription") == 0.0
    assert db.spent(ledger, day="2026-12-02") == pytest.approx(9.0)
    assert db.spent(ledger, day="2026-11-30") == 0.0
    assert db.tokens_spent(ledger, day="2026-12-01", billing_mode="api") == 1215
    assert db.tokens_spent(ledger, day="2026-12-01") == 2415

    summary = db.usage_summary(ledger, day="2026-12-01")
    assert [(r.billing_mode, r.model, r.stage, r.calls) for r in summary] == [
        ("api", "anthropic:claude-sonnet", "build", 1),
        ("api", "anthropic:claude-sonnet", "plan", 1),
        ("subscription", "claude-code", "plan", 1),
    ]
    assert summary[0].usd_cost == pytest.approx(0.5)


def test_day_bucket_is_the_utc_day(ledger: db.Ledger) -> None:
    new_york = timezone(timedelta(hours=-5))
    assert spend(ledger, recorded_at=datetime(2026, 12, 1, 21, 30, tzinfo=new_york))
    assert db.spent(ledger, day="2026-12-02") == pytest.approx(0.006)
    assert db.spent(ledger, day="2026-12-01") == 0.0


@pytest.mark.parametrize(
    "overrides",
    [{"billing_mode": "free"}, {"input_tokens": -1}, {"usd_cost": -0.01}],
)
def test_bad_values_are_a_caller_bug_not_an_outbox_row(
    ledger: db.Ledger, tmp_path: Path, overrides: dict[str, object]
) -> None:
    outbox = tmp_path / "outbox.jsonl"
    with pytest.raises(LedgerInputError):
        spend(ledger, outbox=outbox, **overrides)
    assert not outbox.exists()
    assert db.spent(ledger, day=DAY.date()) == 0.0


def test_a_failed_write_goes_to_the_outbox_and_replay_restores_it(
    ledger: db.Ledger,
) -> None:
    outbox = db.default_outbox_path(ledger)
    assert outbox.parent == ledger.files_dir
    with budget_table_missing(ledger):
        assert spend(ledger) is False, "record_usage reports the outbox, it does not raise"
        assert spend(ledger, stage="build", usd_cost=0.25) is False
    lines = outbox.read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0])["stage"] == "plan"
    assert db.spent(ledger, day="2026-12-01") == 0.0

    report = db.replay_outbox(outbox, ledger)
    assert report == {"replayed": 2, "failed": 0, "remaining": 0, "bad_lines": 0}
    assert not outbox.exists()  # all of it is in the ledger: the file goes
    assert db.spent(ledger, day="2026-12-01") == pytest.approx(0.256)


def test_replay_keeps_bad_lines_untouched_and_failed_rows(
    ledger: db.Ledger, tmp_path: Path
) -> None:
    outbox = tmp_path / "custom" / "outbox.jsonl"
    with budget_table_missing(ledger):
        assert not spend(ledger, outbox=outbox)
    good = outbox.read_text()
    garbage = "this is not json at all\n"
    not_a_row = json.dumps({"thread_id": "t1"}) + "\n"
    outbox.write_text(garbage + good + not_a_row)

    with budget_table_missing(ledger):
        report = db.replay_outbox(outbox, ledger)
    assert report == {"replayed": 0, "failed": 1, "remaining": 3, "bad_lines": 2}
    assert outbox.read_text() == garbage + good + not_a_row

    report = db.replay_outbox(outbox, ledger)
    assert report == {"replayed": 1, "failed": 0, "remaining": 2, "bad_lines": 2}
    assert outbox.read_text() == garbage + not_a_row
    assert db.spent(ledger, day="2026-12-01") == pytest.approx(0.006)


def test_replay_after_a_crash_does_not_count_a_row_twice(ledger: db.Ledger, tmp_path: Path) -> None:
    """A replay killed after inserting but before rewriting the file must be safe to rerun."""
    outbox = tmp_path / "outbox.jsonl"
    with budget_table_missing(ledger):
        spend(ledger, outbox=outbox)
    saved = outbox.read_text()
    db.replay_outbox(outbox, ledger)
    outbox.write_text(saved)  # as if the rewrite never happened
    report = db.replay_outbox(outbox, ledger)
    assert report["replayed"] == 1 and report["remaining"] == 0
    assert db.usage_summary(ledger, day="2026-12-01")[0].calls == 1
    assert db.tokens_spent(ledger, day="2026-12-01") == 1200  # the day's total counted it once
    assert_day_totals_match_rows(ledger)


Totals = dict[tuple[str, str], tuple[int, int, int, float]]
SUMMED = (
    "SELECT day_bucket, billing_mode, COUNT(*) AS calls, SUM(input_tokens) AS input_tokens, "
    "SUM(output_tokens) AS output_tokens, SUM(usd_cost) AS usd_cost FROM budget_ledger "
    "GROUP BY day_bucket, billing_mode"
)


def totals(ledger: db.Ledger, sql: str) -> Totals:
    """(day, mode) -> (calls, input, output, usd) from `sql`, which names its columns so."""
    return {
        (r["day_bucket"], r["billing_mode"]): (
            int(r["calls"]),
            int(r["input_tokens"]),
            int(r["output_tokens"]),
            round(float(r["usd_cost"]), 9),
        )
        for r in ledger.fetch_all(sql)
    }


def day_totals(ledger: db.Ledger) -> Totals:
    return totals(ledger, "SELECT * FROM budget_days")


def assert_day_totals_match_rows(ledger: db.Ledger) -> None:
    """`budget_days` (what the cap check reads) is exactly the sum of the budget rows."""
    assert day_totals(ledger) == totals(ledger, SUMMED)


def test_the_days_totals_move_with_every_row_across_days_and_modes(ledger: db.Ledger) -> None:
    for k in range(12):
        spend(
            ledger,
            stage=f"s{k}",
            billing_mode=("api", "subscription")[k % 2],
            recorded_at=DAY + timedelta(hours=5 * k),  # three UTC days
            input_tokens=100 + k,
            output_tokens=k,
            usd_cost=0.001 * k,
        )
    assert_day_totals_match_rows(ledger)
    assert len(day_totals(ledger)) == 6
    # 15:00 + 5 h a call: calls 2 to 6 fall on 2 December, the even ones billed by the API.
    assert db.tokens_spent(ledger, day="2026-12-02", billing_mode="api") == sum(
        100 + 2 * k for k in (2, 4, 6)
    )
    assert db.spent(ledger, day="2026-12-02") == pytest.approx(0.001 * sum(range(2, 7)))


def test_racing_writers_leave_the_days_total_exact(ledger: db.Ledger) -> None:
    """Eight threads recording at once (PostgreSQL retries what SERIALIZABLE refuses)."""

    def record(worker: int) -> None:
        for k in range(15):
            assert spend(ledger, thread_id=f"t{worker}", stage=f"s{k}", input_tokens=k)

    threads = [threading.Thread(target=record, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert_day_totals_match_rows(ledger)
    assert day_totals(ledger)[("2026-12-01", "api")][0] == 120
    assert db.tokens_spent(ledger, day="2026-12-01") == 8 * sum(range(15)) + 120 * 200


def test_replay_of_a_missing_outbox_is_empty(ledger: db.Ledger, tmp_path: Path) -> None:
    report = db.replay_outbox(tmp_path / "none.jsonl", ledger)
    assert report == {"replayed": 0, "failed": 0, "remaining": 0, "bad_lines": 0}
    assert not (tmp_path / "none.jsonl").exists()
