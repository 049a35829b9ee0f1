"""The Slack settings group: what every module of this package reads, and nothing else.

A module of its own so the transport, the listener and the doctor checks can
import it without importing `integration.py` (which imports them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from agent_team.config import Settings

__all__ = ["SlackSettings"]


@dataclass(frozen=True)
class SlackSettings:
    """The `AGENT_TEAM_SLACK_*` settings, the transport switch, and the shared ones Slack uses."""

    transport: str
    bot_token: SecretStr | None
    signing_secret: SecretStr | None
    app_token: SecretStr | None
    channel: str | None
    allowed_users: tuple[str, ...]
    escalate_to: tuple[str, ...]
    api_url: str
    reminder_fractions: tuple[float, ...]  # of a question's deadline, validated and sorted
    dashboard_url: str | None
    db_path: Path
    ledger_target: str | Path  # what db.open_ledger opens: a SQLite path or a URL

    @classmethod
    def from_settings(cls, settings: Settings) -> SlackSettings:
        return cls(
            transport=settings.transport,
            bot_token=settings.slack_bot_token,
            signing_secret=settings.slack_signing_secret,
            app_token=settings.slack_app_token,
            channel=settings.slack_channel,
            allowed_users=tuple(settings.slack_allowed_users),
            escalate_to=tuple(settings.slack_escalate_to),
            api_url=settings.slack_api_url,
            reminder_fractions=tuple(settings.reminder_fractions()),
            dashboard_url=settings.dashboard_url,
            db_path=settings.db_path,
            ledger_target=settings.ledger_target,
        )

    @property
    def socket_mode(self) -> bool:
        """An app-level token means Socket Mode instead of `POST /slack/events`."""
        return self.app_token is not None
