"""Slack wired into the daemon: the events route or Socket Mode loop, and the reminder loop."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from agent_team.config import Settings
from agent_team.health.loops import Loop
from agent_team.integrations.slack.settings import SlackSettings

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from agent_team.coordinator import Coordinator, TaskObserver
    from agent_team.health.checks import CheckFn
    from agent_team.health.status import Health
    from agent_team.integrations.slack.digest import Digest
    from agent_team.integrations.slack.ingress import SlackListener
    from agent_team.integrations.slack.transport import SlackTransport

__all__ = ["DIGEST_EVERY_S", "SlackIntegration", "SlackSettings"]

DIGEST_EVERY_S = 60.0  # how often the digest loop looks whether today's digest is due


class SlackIntegration:
    """The listener (HTTP route or Socket Mode loop) and the reminder loop of one daemon."""

    name: ClassVar[str] = "slack"

    def __init__(self, settings: Settings, coordinator: Coordinator) -> None:
        """Build the listener; the bot token is checked here, before READY.

        Bolt's lazy check on the first request would ack that request and drop
        it if the call failed.

        Raises:
            ConfigError: Slack refused the bot token or could not be reached.
        """
        # Imported here so the local transport never loads slack-bolt.
        from agent_team.integrations.slack.followups import TIMERS_S
        from agent_team.integrations.slack.ingress import SlackListener
        from agent_team.integrations.slack.transport import SlackTransport, build_slack_transport

        self._settings = SlackSettings.from_settings(settings)
        transport = coordinator.transport
        self._owns_transport = not isinstance(transport, SlackTransport)
        if not isinstance(transport, SlackTransport):  # a test handed in its own transport
            transport = build_slack_transport(
                settings, clock=coordinator.clock, ledger=coordinator.ledger
            )
        self.transport: SlackTransport = transport
        self.listener: SlackListener = SlackListener(
            self._settings,
            transport,
            answer=coordinator.answer,
            clock=coordinator.clock,
            verify_token=True,
        )
        # Several daemons on one database remind by turns, so nobody is reminded twice.
        self._reminders = coordinator.loop_lease("slack-reminders", every_s=TIMERS_S)
        self.digest: Digest | None = None
        if settings.slack_digest_at:
            self.digest = self._make_digest(settings, coordinator, transport)
            self._digest_turn = coordinator.loop_lease("slack-digest", every_s=DIGEST_EVERY_S)

    @staticmethod
    def _make_digest(
        settings: Settings, coordinator: Coordinator, transport: SlackTransport
    ) -> Digest:
        from agent_team.integrations.slack.digest import DailyTime, Digest
        from agent_team.reports import triage

        ledger, channel = coordinator.ledger, settings.slack_channel or ""

        def items(now: datetime) -> list[triage.TriageItem]:
            with ledger.snapshot() as view:
                return triage.for_settings(view, settings, now)

        return Digest(
            ledger,
            when=DailyTime.parse(settings.slack_digest_at or ""),
            items=items,
            post=lambda text: transport.post(channel, text),
            clock=coordinator.clock,
            dashboard_url=settings.dashboard_url,
        )

    @classmethod
    def enabled(cls, settings: Settings) -> bool:
        return settings.transport == "slack"

    @classmethod
    def doctor_checks(cls) -> Sequence[CheckFn]:
        from agent_team.integrations.slack.doctor import check_slack, check_slack_allowed_users

        return (check_slack, check_slack_allowed_users)

    @property
    def settings(self) -> SlackSettings:
        return self._settings

    def routes(self) -> Sequence[BaseRoute]:
        return [] if self.listener.socket_mode else [self.listener.route()]

    def loops(self, health: Health) -> Sequence[Loop]:
        listener = self.listener
        loops: list[Loop] = []
        if listener.socket_mode:
            loops.append(
                Loop(
                    "slack-socket",
                    lambda stop, _first: listener.run_socket_mode(
                        stop, lambda: health.beat("slack-socket")
                    ),
                )
            )
        digest = self.digest
        if digest is not None:
            turn = self._digest_turn.turn

            def post_digest(stop: threading.Event, _first: bool) -> None:
                while not stop.is_set():
                    if turn():
                        digest.maybe_post()
                    health.beat("slack-digest")
                    stop.wait(DIGEST_EVERY_S)

            loops.append(Loop("slack-digest", post_digest))
        loops.append(
            Loop(
                "slack-reminders",
                lambda stop, _first: listener.run_timers(
                    stop, lambda: health.beat("slack-reminders"), turn=self._reminders.turn
                ),
            )
        )
        return loops

    def observers(self) -> Sequence[TaskObserver]:
        return []  # task events reach Slack as the coordinator's transport

    def facts(self) -> dict[str, object]:
        return {"slack": "socket mode" if self.listener.socket_mode else "http /slack/events"}

    def close(self) -> None:
        """The transport it made for itself; the coordinator's own is the daemon's to close."""
        if self._owns_transport:
            self.transport.close()
