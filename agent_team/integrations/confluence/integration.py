"""Confluence in the integration shape: settings and a doctor check, nothing to plug in.

The lane lives in the coordinator's graph (`GraphDeps.confluence`, built and
closed by the coordinator from the settings), and its approval questions
travel through the transport like every other gate, so it needs no route,
loop or observer of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pydantic import SecretStr

from agent_team.config import Settings

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from agent_team.coordinator import TaskObserver
    from agent_team.doctor import CheckFn
    from agent_team.health import Health
    from agent_team.loops import Loop

__all__ = ["ConfluenceIntegration", "ConfluenceSettings"]


@dataclass(frozen=True)
class ConfluenceSettings:
    """The `AGENT_TEAM_CONFLUENCE_*` settings."""

    enabled: bool
    base_url: str | None
    space_id: str | None
    parent_id: str | None
    email: str | None
    api_token: SecretStr | None
    client_id: str | None
    client_secret: SecretStr | None
    token_url: str
    dry_run: bool
    mermaid_macros: tuple[str, ...]
    retry_cap_s: float
    deadline_h: float

    @classmethod
    def from_settings(cls, settings: Settings) -> ConfluenceSettings:
        return cls(
            enabled=settings.confluence_enabled,
            base_url=settings.confluence_base_url,
            space_id=settings.confluence_space_id,
            parent_id=settings.confluence_parent_id,
            email=settings.confluence_email,
            api_token=settings.confluence_api_token,
            client_id=settings.confluence_client_id,
            client_secret=settings.confluence_client_secret,
            token_url=settings.confluence_token_url,
            dry_run=settings.confluence_dry_run,
            mermaid_macros=tuple(settings.confluence_mermaid_macros),
            retry_cap_s=settings.confluence_retry_cap_s,
            deadline_h=settings.confluence_deadline_h,
        )


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
