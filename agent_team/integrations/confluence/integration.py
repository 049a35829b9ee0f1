"""Confluence in the integration shape: settings and a doctor check, nothing to plug in.

The lane lives in the coordinator's graph (`GraphDeps.confluence`, built and
closed by the coordinator from the settings), and its approval questions
travel through the transport like every other gate, so it needs no route,
loop or observer of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from agent_team.config import Settings
from agent_team.integrations.confluence.settings import ConfluenceSettings

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from agent_team.coordinator import TaskObserver
    from agent_team.health.checks import CheckFn
    from agent_team.health.loops import Loop
    from agent_team.health.status import Health

__all__ = ["ConfluenceIntegration", "ConfluenceSettings"]


class ConfluenceIntegration:
    """The Confluence lane as the daemon sees it: on or off, and a doctor check."""

    name: ClassVar[str] = "confluence"

    def __init__(self, settings: Settings) -> None:
        self._settings = ConfluenceSettings.from_settings(settings)

    @classmethod
    def enabled(cls, settings: Settings) -> bool:
        return settings.confluence_enabled

    @classmethod
    def doctor_checks(cls) -> Sequence[CheckFn]:
        from agent_team.integrations.confluence.doctor import check_confluence

        return (check_confluence,)

    @property
    def settings(self) -> ConfluenceSettings:
        return self._settings

    def routes(self) -> Sequence[BaseRoute]:
        return []

    def loops(self, health: Health) -> Sequence[Loop]:
        return []

    def observers(self) -> Sequence[TaskObserver]:
        return []

    def facts(self) -> dict[str, object]:
        return {}

    def close(self) -> None:
        """Nothing of its own: the coordinator closes the lane's client."""
