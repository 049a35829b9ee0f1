"""Pick the transport the settings name; the daemon and `agent-team tick` both use this."""

from __future__ import annotations

from agent_team import db
from agent_team.config import Settings
from agent_team.transports.base import Transport
from agent_team.transports.local import LocalTransport

__all__ = ["make_transport"]


def make_transport(settings: Settings, *, ledger: db.Ledger | None = None) -> Transport:
    """The configured transport, on the process's ledger (None: it opens its own when needed).

    Raises:
        ConfigError: `transport=slack` without the settings it needs (the message
            names each missing variable).
    """
    if settings.transport == "slack":
        # Imported here so the local transport never loads slack-bolt.
        from agent_team.integrations.slack.transport import build_slack_transport

        return build_slack_transport(settings, ledger=ledger)
    return LocalTransport()
