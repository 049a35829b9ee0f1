"""plan_review: a human approves, revises, edits or rejects the plan. Never defaults to yes."""

from __future__ import annotations

from typing import Any

from agent_team.models.schemas import Plan
from agent_team.nodes.common import GraphDeps, ask_human, crash_point, enter
from agent_team.requests.answers import PLAN_DECISION_HELP
from agent_team.task_model import Phase, QuestionKind, TaskState

__all__ = ["plan_review", "route_after_review"]


def plan_review(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.PLAN_REVIEW)
    current = Plan.model_validate(state["plan"])
    answer = ask_human(
        deps,
        state,
        QuestionKind.PLAN_DECISION,
        {
            "text": f"Review the plan for: {state['title']}",
            "title": state["title"],
            "plan_markdown": current.to_markdown(),
            "help": PLAN_DECISION_HELP,
        },
    )
    decision = str(answer.get("decision", ""))
    text = str(answer.get("text", ""))
    update: dict[str, Any] = {"decision": decision, "turn": state.get("turn", 0) + 1}
    if decision == "revise":
        update["plan_feedback"] = text
    elif decision == "edit":
        update["plan"] = Plan.from_text(text).model_dump()
        update["plan_source"] = "human"
    elif decision == "reject":
        update["outcome"] = "cancelled"
    crash_point(deps, Phase.PLAN_REVIEW, "after")
    return update


def route_after_review(state: TaskState) -> str:
    decision = state.get("decision")
    if decision in ("approve", "edit"):
        return Phase.BUILD.value
    if decision == "revise":
        return Phase.PLAN.value
    return Phase.DONE.value
