"""build: run the configured builder once per approved plan.

The builder records its result in git (a commit carrying the plan's hash),
and `run_build` looks for that commit first, so a restart after a crash
reuses the build instead of running it again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_team import db
from agent_team.builders.base import BuildTask
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
        repo=Path(repo) if repo else None,
    )
    result = deps.build(task, Plan.model_validate(state["plan"]).to_markdown())
    if result.usage is not None and not result.reused:
        db.record_usage(
            deps.conn,
            thread_id=state["task_id"],
            stage=Phase.BUILD.value,
            model=result.usage.model,
            billing_mode=deps.billing_mode,
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
            usd_cost=result.usage.usd_cost,
            outbox=deps.outbox,
        )
    crash_point(deps, Phase.BUILD, "after")
    return {"build": result.model_dump(mode="json")}
