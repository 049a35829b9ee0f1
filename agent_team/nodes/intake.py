"""intake: the task enters the graph; routing decides its lane."""

from __future__ import annotations

from typing import Any

from agent_team.exceptions import TaskRefusedError
from agent_team.nodes.common import GraphDeps, crash_point, enter
from agent_team.task_model import Phase, TaskKind, TaskState

__all__ = ["intake", "route_after_intake"]


def intake(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.INTAKE)
    update: dict[str, Any] = {
        "clarifications": state.get("clarifications", []),
        "clarify_rounds": state.get("clarify_rounds", 0),
        "turn": state.get("turn", 0),
    }
    crash_point(deps, Phase.INTAKE, "after")
    return update


def route_after_intake(state: TaskState) -> str:
    """`code` tasks go to clarify; `confluence` tasks need the docs lane (not built yet)."""
    if state.get("kind") == TaskKind.CONFLUENCE:
        raise TaskRefusedError(
            "confluence tasks need the documentation lane, which this build does not have"
        )
    return Phase.CLARIFY.value
