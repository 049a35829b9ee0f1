"""build: run the configured builder once per approved plan.

The builder records its result in git (a commit carrying the plan's hash),
and `run_build` looks for that commit first, so a restart after a crash
reuses the build instead of running it again.
"""

from __future__ import annotations

from typing import Any

from agent_team import db
from agent_team.builders.base import BuildTask, BuildUsage
from agent_team.exceptions import BuildError
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
    try:
        result = deps.build(task, Plan.model_validate(state["plan"]).to_markdown())
    except BuildError as exc:
        if isinstance(exc.usage, BuildUsage):  # a failed run still cost money
            _record(deps, state, exc.usage)
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
