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
from agent_team.builders.base import BuildResult, BuildTask, BuildUsage
from agent_team.exceptions import BudgetExhaustedError, BuildError, TaskStoppedError
from agent_team.models.schemas import Plan
from agent_team.nodes.common import GraphDeps, crash_point, enter
from agent_team.task_model import Phase, TaskState

__all__ = ["build", "run_priced_build"]


def build(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.BUILD)
    repo = state.get("repo")
    task = BuildTask(
        task_id=state["task_id"],
        title=state["title"],
        body=state.get("body", ""),
        repo=repo or None,  # a path, a URL or owner/name (common.repo_spec)
    )
    result = run_priced_build(deps, state, task, Plan.model_validate(state["plan"]).to_markdown())
    crash_point(deps, Phase.BUILD, "after")
    return {"build": result.model_dump(mode="json")}


def run_priced_build(
    deps: GraphDeps,
    state: TaskState,
    task: BuildTask,
    plan_markdown: str,
    *,
    stage: Phase = Phase.BUILD,
) -> BuildResult:
    """Run the builder on `plan_markdown` once, spending from the day's budget.

    The build and every follow-up commit on its pull request (`nodes.pull_request`)
    go through here: same builder, same sandbox, same cap. A priced builder
    starts only while today's cap is not reached; what it cost is recorded under
    `stage`, a failed or stopped run's too.
    """
    if deps.build_priced:
        # Raises BudgetExhaustedError (a ParkingError) before any build process starts.
        deps.caller.check_remaining(stage.value)
    try:
        result = deps.build(task, plan_markdown)
    except (BuildError, TaskStoppedError) as exc:
        if isinstance(exc.usage, BuildUsage):  # a failed or stopped run still cost money
            _record(deps, state, exc.usage, stage)
        if isinstance(exc, TaskStoppedError) and exc.reason == "budget":
            raise BudgetExhaustedError(str(exc)) from None
        raise
    if result.usage is not None and not result.reused:
        _record(deps, state, result.usage, stage)
    return result


def _record(deps: GraphDeps, state: TaskState, usage: BuildUsage, stage: Phase) -> None:
    db.record_usage(
        deps.ledger,
        thread_id=state["task_id"],
        stage=stage.value,
        model=usage.model,
        billing_mode=deps.billing_mode,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        usd_cost=usage.usd_cost,
        outbox=deps.outbox,
    )
