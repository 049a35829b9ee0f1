"""Read queries the dashboard's HTML pages need beyond the per-row API.

Why a module of its own: the overview shows every listed task's cost, and
asking `task_usage` once per row would be one query per task on every
auto-refresh; this is one aggregate query instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from agent_team.db.ledger import Reader

__all__ = ["TaskCost", "stopped_phases", "task_costs", "task_sources"]

# SQLite's default limit on host parameters is 999 on old builds; stay below it.
_CHUNK = 500


class TaskCost(NamedTuple):
    """One task's recorded spend over all days and billing modes."""

    usd: float
    tokens: int


def task_costs(ledger: Reader, task_ids: Sequence[str]) -> dict[str, TaskCost]:
    """USD and tokens recorded per task, for the given tasks.

    Returns:
        An entry for every id in `task_ids`; a task with no recorded calls
        costs `TaskCost(0.0, 0)`.
    """
    wanted = list(dict.fromkeys(task_ids))
    costs = {task_id: TaskCost(0.0, 0) for task_id in wanted}
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        marks = ", ".join("?" for _ in chunk)
        rows = ledger.fetch_all(
            "SELECT thread_id, COALESCE(SUM(usd_cost), 0) AS usd, "
            "COALESCE(SUM(input_tokens + output_tokens), 0) AS tokens "
            f"FROM budget_ledger WHERE thread_id IN ({marks}) GROUP BY thread_id",
            chunk,
        )
        for row in rows:
            costs[row["thread_id"]] = TaskCost(float(row["usd"]), int(row["tokens"]))
    return costs


def stopped_phases(ledger: Reader, task_ids: Sequence[str]) -> dict[str, str]:
    """Where each of these tasks last was before `done`: what a list shows for a cancelled
    task, whose own phase reads `done` (`TaskReport.stopped_in` says the same for one)."""
    wanted = list(dict.fromkeys(task_ids))
    found: dict[str, str] = {}
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        marks = ", ".join("?" for _ in chunk)
        rows = ledger.fetch_all(
            "SELECT thread_id, to_phase FROM task_transitions "
            f"WHERE thread_id IN ({marks}) AND to_phase <> 'done' ORDER BY transition_id",
            chunk,
        )
        for row in rows:  # the last one per task wins
            found[str(row["thread_id"])] = str(row["to_phase"])
    return found


def task_sources(ledger: Reader) -> list[str]:
    """Every `tasks.source` in use, sorted: the overview's source filter offers these."""
    rows = ledger.fetch_all("SELECT DISTINCT source FROM tasks ORDER BY source")
    return [str(row["source"]) for row in rows]
