"""done: the last node. The coordinator sets the terminal status after the run ends."""

from __future__ import annotations

from typing import Any

from agent_team.nodes.common import GraphDeps, enter
from agent_team.task_model import Phase, TaskState

__all__ = ["done"]


def done(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.DONE)
    return {"outcome": state.get("outcome") or "done"}
