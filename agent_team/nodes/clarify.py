"""clarify: the model decides whether the issue is clear; if not, a human is asked.

Two nodes share the `clarify` phase: `clarify` calls the model, and
`clarify_gate` asks. Keeping the model call out of the gate node means a
resume (which re-runs the gate node) never pays for the call twice.
"""

from __future__ import annotations

from typing import Any

from agent_team.models.prompts import clarify_messages
from agent_team.models.schemas import ClarifyDecision
from agent_team.nodes.common import GraphDeps, ask_human, crash_point, enter
from agent_team.task_model import Phase, QuestionKind, TaskState

__all__ = ["clarify", "clarify_gate", "route_after_clarify"]


def _pairs(state: TaskState) -> list[tuple[str, str]]:
    return [(c["question"], c["answer"]) for c in state.get("clarifications", [])]


def clarify(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.CLARIFY)
    if state.get("clarify_rounds", 0) >= deps.max_clarify_rounds:
        return {"pending_question": None}
    decision = deps.caller.structured(
        thread_id=state["task_id"],
        stage=Phase.CLARIFY.value,
        schema=ClarifyDecision,
        messages=clarify_messages(state["title"], state.get("body", ""), _pairs(state)),
    )
    crash_point(deps, Phase.CLARIFY, "after")
    return {"pending_question": None if decision.clear else decision.question}


def route_after_clarify(state: TaskState) -> str:
    return "clarify_gate" if state.get("pending_question") else Phase.PLAN.value


def clarify_gate(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    question = state.get("pending_question") or "Could you say more about what is needed?"
    answer = ask_human(
        deps,
        state,
        QuestionKind.CLARIFY,
        {"text": question, "title": state["title"], "help": "reply with the missing details"},
    )
    return {
        "clarifications": [
            *state.get("clarifications", []),
            {"question": question, "answer": str(answer.get("text", ""))},
        ],
        "clarify_rounds": state.get("clarify_rounds", 0) + 1,
        "turn": state.get("turn", 0) + 1,
        "pending_question": None,
    }
