"""plan: the model writes a structured plan (again, with feedback, after a `revise`)."""

from __future__ import annotations

from typing import Any

from agent_team.models.prompts import plan_messages
from agent_team.models.schemas import Plan
from agent_team.nodes.common import GraphDeps, crash_point, enter, people_notes
from agent_team.task_model import Phase, TaskState

__all__ = ["plan"]


def plan(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.PLAN)
    previous = Plan.model_validate(state["plan"]) if state.get("plan") else None
    result = deps.caller.structured(
        thread_id=state["task_id"],
        stage=Phase.PLAN.value,
        schema=Plan,
        messages=plan_messages(
            state["title"],
            state.get("body", ""),
            [(c["question"], c["answer"]) for c in state.get("clarifications", [])],
            state.get("plan_feedback"),
            previous,
            people_notes(deps, state["task_id"]),
        ),
    )
    crash_point(deps, Phase.PLAN, "after")
    return {"plan": result.model_dump(), "plan_source": "model", "decision": None}
