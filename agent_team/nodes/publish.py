"""publish: hand a finished build to the team (a draft pull request), once.

A node of its own after `build`, so a resume never repeats the build; the
publisher records its side effects (push, PR) in the ledger and returns the
recorded result when run again, so a restart never opens a second PR.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_team.exceptions import PublishFailedError
from agent_team.nodes.common import GraphDeps, enter
from agent_team.task_model import Phase, TaskState

__all__ = ["Publish", "PublishHook", "publish"]

Publish = Callable[[TaskState], dict[str, Any] | None]


class PublishHook:
    """The `publish` node's target, bound once the integration that publishes is built.

    The graph is compiled before the integrations, which are built against
    the coordinator; so the graph holds this hook and the GitHub integration
    binds its publisher to it. The worker starts only after the wiring has
    finished, so no run meets an unbound hook in a process built by the wiring.
    """

    def __init__(self) -> None:
        self._target: Publish | None = None

    def bind(self, target: Publish) -> None:
        self._target = target

    def __call__(self, state: TaskState) -> dict[str, Any] | None:
        if self._target is None:
            raise PublishFailedError(
                "the publish step has no publisher (the GitHub integration was not built); "
                "check AGENT_TEAM_GITHUB_REPOS and AGENT_TEAM_GITHUB_OPEN_PR"
            )
        return self._target(state)


def publish(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.BUILD)  # part of the build phase (a no-op on entry)
    if deps.publish is None or not state.get("build"):
        return {}
    result = deps.publish(state)
    return {"pull_request": result} if result else {}
