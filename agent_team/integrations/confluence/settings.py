"""The Confluence settings group: what every module of this package reads, and nothing else.

A module of its own so the client, the lane and the doctor check can import it
without importing `integration.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import SecretStr

from agent_team.config import Settings

__all__ = ["ConfluenceSettings"]


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
