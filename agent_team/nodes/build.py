"""build: run the configured builder once per approved plan.

The builder records its result in git (a commit carrying the plan's hash),
and `run_build` looks for that commit first, so a restart after a crash
reuses the build instead of running it again.

A priced builder (`GraphDeps.build_priced`: `claude-code`) spends from the
day's budget, so it starts only while today's cap is not reached
(`ModelCaller.check_remaining`); otherwise the task parks `budget_exhausted`
and continues after UTC midnight. The check comes before `run_build`, so a
build recorded before a crash also waits for the next day when today's cap is
reached meanwhile: a delay, never a second build.
"""

from __future__ import annotations

from typing import Any

from agent_team import db
from agent_team.builders.base import BuildTask, BuildUsage
from agent_team.exceptions import BudgetExhaustedError, BuildError, TaskStoppedError
from agent_team.models.schemas import Plan
from agent_team.nodes.common import GraphDeps, crash_point, enter
from agent_team.task_model import Phase, TaskState

__all__ = ["build"]


def build(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.BUILD)
    repo = state.get("repo")
    task = BuildTask(
        task_id=state["task_id"],
        title=state["title"],
        body=state.get("body", ""),
        repo=repo or None,  # a path, a URL or owner/name (common.repo_spec)
    )
    if deps.build_priced:
        # Raises BudgetExhaustedError (a ParkingError) before any build process starts.
        deps.caller.check_remaining(Phase.BUILD.value)
    try:
        result = deps.build(task, Plan.model_validate(state["plan"]).to_markdown())
    except (BuildError, TaskStoppedError) as exc:
        if isinstance(exc.usage, BuildUsage):  # a failed or stopped run still cost money
            _record(deps, state, exc.usage)
        if isinstance(exc, TaskStoppedError) and exc.reason == "budget":
            raise BudgetExhaustedError(str(exc)) from None
        raise
    if result.usage is not None and not result.reused:
        _record(deps, state, result.usage)
    crash_point(deps, Phase.BUILD, "after")
    return {"build": result.model_dump(mode="json")}


def _record(deps: GraphDeps, state: TaskState, usage: BuildUsage) -> None:
    db.record_usage(
        deps.ledger,
        thread_id=state["task_id"],
        stage=Phase.BUILD.value,
        model=usage.model,
        billing_mode=deps.billing_mode,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        usd_cost=usage.usd_cost,
        outbox=deps.outbox,
    )
