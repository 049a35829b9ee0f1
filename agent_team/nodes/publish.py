"""publish: hand a finished build to the team (a draft pull request), once.

A node of its own after `build`, so a resume never repeats the build; the
publisher records its side effects (push, PR) in the ledger and returns the
recorded result when run again, so a restart never opens a second PR.
"""

from __future__ import annotations

from typing import Any

from agent_team.nodes.common import GraphDeps, enter
from agent_team.task_model import Phase, TaskState

__all__ = ["publish"]


def publish(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.BUILD)  # part of the build phase (a no-op on entry)
    if deps.publish is None or not state.get("build"):
        return {}
    result = deps.publish(state)
    return {"pull_request": result} if result else {}
