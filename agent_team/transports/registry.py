"""Pick the transport the settings name; the daemon and `agent-team tick` both use this."""

from __future__ import annotations

from agent_team.config import Settings
from agent_team.exceptions import ConfigError
from agent_team.transports.base import Transport
from agent_team.transports.local import LocalTransport

__all__ = ["make_transport"]


def make_transport(settings: Settings) -> Transport:
    if settings.transport == "local":
        return LocalTransport()
    raise ConfigError(f"AGENT_TEAM_TRANSPORT={settings.transport} is not available yet")
