"""clarify: the model decides whether the issue is clear; if not, a human is asked.

Two nodes share the `clarify` phase: `clarify` calls the model, and
`clarify_gate` asks. Keeping the model call out of the gate node means a
resume (which re-runs the gate node) never pays for the call twice.

Each round the model gets the earlier questions and answers, and is told to
say what they left open. A question it asked before word for word is never
posted again as it was: the person would not know why their answer was not
enough, so it is posted with the round and the answer that did not settle it.
"""

from __future__ import annotations

from typing import Any

from agent_team.models.prompts import clarify_messages
from agent_team.models.schemas import ClarifyDecision
from agent_team.nodes.common import GraphDeps, ask_human, crash_point, enter, people_notes
from agent_team.task_model import Phase, QuestionKind, TaskState

__all__ = ["clarify", "clarify_gate", "not_repeated", "route_after_clarify"]


def _pairs(state: TaskState) -> list[tuple[str, str]]:
    return [(c["question"], c["answer"]) for c in state.get("clarifications", [])]


_ANSWER_SHOWN = 80


def _said(text: str) -> str:
    return " ".join(text.split()).casefold()


def not_repeated(question: str, pairs: list[tuple[str, str]]) -> str:
    """`question`, or, when it was asked before, the same with why it is asked again.

    The round number makes the text new even if the model repeats itself again.
    """
    if not pairs or _said(question) not in {_said(asked) for asked, _ in pairs}:
        return question
    last = " ".join(pairs[-1][1].split())
    if len(last) > _ANSWER_SHOWN:
        last = last[: _ANSWER_SHOWN - 1] + "…"
    return (
        f"{question} (Asked again in round {len(pairs) + 1}: the answer '{last}' did not "
        "settle it; please add what it leaves out.)"
    )


def clarify(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.CLARIFY)
    if state.get("clarify_rounds", 0) >= deps.max_clarify_rounds:
        return {"pending_question": None}
    pairs = _pairs(state)
    decision = deps.caller.structured(
        thread_id=state["task_id"],
        stage=Phase.CLARIFY.value,
        schema=ClarifyDecision,
        messages=clarify_messages(
            state["title"], state.get("body", ""), pairs, people_notes(deps, state["task_id"])
        ),
    )
    crash_point(deps, Phase.CLARIFY, "after")
    if decision.clear or not decision.question:
        return {"pending_question": None}
    return {"pending_question": not_repeated(decision.question, pairs)}


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
