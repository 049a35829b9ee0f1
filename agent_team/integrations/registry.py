"""Which integrations exist, in the order the daemon installs them and the doctor lists them.

The modules are imported here, on demand, so a process that never calls
these (and a daemon with the local transport, for Slack's Bolt app) does not
load what it does not use.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

    from agent_team.config import Settings
    from agent_team.coordinator import Coordinator
    from agent_team.integrations.base import Integration


__all__ = ["build_integrations", "integration_types"]


def integration_types() -> tuple[type[Integration], ...]:
    """Every integration class, in install order: Slack, GitHub, Confluence, the LangGraph API."""
    from agent_team.integrations.confluence.integration import ConfluenceIntegration
    from agent_team.integrations.github.integration import GitHubIntegration
    from agent_team.integrations.langgraph_api.integration import LangGraphApiIntegration
    from agent_team.integrations.slack.integration import SlackIntegration

    return (SlackIntegration, GitHubIntegration, ConfluenceIntegration, LangGraphApiIntegration)


def build_integrations(
    settings: Settings,
    coordinator: Coordinator,
    *,
    github_transport: httpx.BaseTransport | None = None,
    only: Container[str] | None = None,
) -> Iterator[Integration]:
    """Build each enabled integration against `coordinator`, one at a time.

    A generator, so the caller installs each before the next is built and
    knows what to close when a later one refuses to start.

    Args:
        github_transport: an httpx transport for the GitHub clients (tests).
        only: the names to build (`agent-team tick` wants GitHub alone); None: all.

    Raises:
        ConfigError: an integration cannot start with these settings (Slack
            refused the bot token, ...).
    """
    from agent_team.integrations.confluence.integration import ConfluenceIntegration
    from agent_team.integrations.github.integration import GitHubIntegration
    from agent_team.integrations.langgraph_api.integration import LangGraphApiIntegration
    from agent_team.integrations.slack.integration import SlackIntegration

    # The order of `integration_types()`; each constructor takes what it needs.
    def wanted(kind: type[Integration]) -> bool:
        return kind.enabled(settings) and (only is None or kind.name in only)

    if wanted(SlackIntegration):
        yield SlackIntegration(settings, coordinator)
    if wanted(GitHubIntegration):
        yield GitHubIntegration.create(settings, coordinator, transport=github_transport)
    if wanted(ConfluenceIntegration):
        yield ConfluenceIntegration(settings)
    if wanted(LangGraphApiIntegration):
        yield LangGraphApiIntegration.create(settings, coordinator)
