"""Where a follow-up commit goes: the `PullRequestDesk` protocol and the graph's late-bound hook.

A module of its own so `nodes.common` (GraphDeps) can name the type without
importing the nodes that use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from agent_team.builders.base import BuildResult
from agent_team.exceptions import PublishFailedError
from agent_team.task_model import TaskState

__all__ = ["PullRequestDesk", "PullRequestHook"]


class PullRequestDesk(Protocol):
    """Where a follow-up commit goes: pushed to the PR's branch and answered on GitHub."""

    def follow_up(
        self,
        state: TaskState,
        build: BuildResult,
        round_: int,
        items: Sequence[dict[str, Any]],
        crash: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Push `build` and answer the feedback; idempotent (recorded effects).

        `crash(point)` is the test hook: it dies like `kill -9` at a named point.

        Returns:
            What to keep (`commit`, `url`, `replies`, `resolved`), or `{"refused": why}`
            when the commit must not be pushed (it only removes or skips tests).
        """
        ...


class PullRequestHook:
    """The graph's desk, bound once the GitHub integration is built (as `PublishHook`)."""

    def __init__(self) -> None:
        self._desk: PullRequestDesk | None = None

    def bind(self, desk: PullRequestDesk) -> None:
        self._desk = desk

    def follow_up(
        self,
        state: TaskState,
        build: BuildResult,
        round_: int,
        items: Sequence[dict[str, Any]],
        crash: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        if self._desk is None:
            raise PublishFailedError(
                "the follow-up has nowhere to go (the GitHub integration was not built); "
                "check AGENT_TEAM_GITHUB_REPOS"
            )
        return self._desk.follow_up(state, build, round_, items, crash)
