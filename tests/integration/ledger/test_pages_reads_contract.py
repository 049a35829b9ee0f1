"""Contract: `task_costs`, the overview's per-task spend in one query."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent_team import db

DAY = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)


def _spend(conn: db.Ledger, thread_id: str, usd: float, tokens_in: int, at: datetime) -> None:
    assert db.record_usage(
        conn,
        thread_id=thread_id,
        stage="plan",
        model="anthropic:claude-sonnet",
        billing_mode="api",
        input_tokens=tokens_in,
        output_tokens=10,
        usd_cost=usd,
        recorded_at=at,
    )


def test_task_costs_sums_every_day_and_mode_per_task(ledger: db.Ledger) -> None:
    _spend(ledger, "t1", 0.5, 100, DAY)
    _spend(ledger, "t1", 0.25, 200, DAY - timedelta(days=3))  # an older day counts too
    _spend(ledger, "t2", 1.0, 5, DAY)
    _spend(ledger, "other", 9.0, 9, DAY)  # not asked for
    costs = db.task_costs(ledger, ["t1", "t2", "t3"])
    assert costs == {
        "t1": db.TaskCost(0.75, 320),
        "t2": db.TaskCost(1.0, 15),
        "t3": db.TaskCost(0.0, 0),  # no calls yet: zero, not missing
    }


def test_task_costs_of_no_tasks_and_of_repeated_ids(ledger: db.Ledger) -> None:
    _spend(ledger, "t1", 0.5, 100, DAY)
    assert db.task_costs(ledger, []) == {}
    assert db.task_costs(ledger, ["t1", "t1"]) == {"t1": db.TaskCost(0.5, 110)}


def test_task_costs_of_more_ids_than_one_query_takes(ledger: db.Ledger) -> None:
    ids = [f"t{n}" for n in range(1200)]  # over SQLite's old 999-parameter limit
    _spend(ledger, "t1199", 2.0, 1, DAY)
    costs = db.task_costs(ledger, ids)
    assert len(costs) == 1200
    assert costs["t1199"] == db.TaskCost(2.0, 11)
    assert costs["t0"] == db.TaskCost(0.0, 0)
