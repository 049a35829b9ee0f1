"""The Confluence lane's settings and client, as the graph's nodes see them.

`ConfluenceLane` is what the graph's nodes get (through `GraphDeps.confluence`)
when `AGENT_TEAM_CONFLUENCE_ENABLED` is on; with the flag off it is None and
the graph is exactly the one without the lane.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_team.common.redact import redact_deep
from agent_team.exceptions import ConfigError, ConfluenceRefusedError
from agent_team.integrations.confluence.client import ConfluenceClient
from agent_team.integrations.confluence.settings import ConfluenceSettings

__all__ = ["ConfluenceLane", "lane_from_settings"]


@dataclass
class ConfluenceLane:
    """The lane's settings and a lazily built client (one per process, thread-safe)."""

    space_id: str | None
    parent_id: str | None
    dry_run: bool
    macro_keys: tuple[str, ...]
    make_client: Callable[[], ConfluenceClient] | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)  # the lane's own credentials
    _client: ConfluenceClient | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def client(self, why: str) -> ConfluenceClient:
        """The client; refuses (parks the task) when Confluence is not configured.

        Args:
            why: what the client is needed for, for the refusal message.
        """
        with self._lock:
            if self._client is None:
                if self.make_client is None:
                    raise ConfluenceRefusedError(
                        f"{why} needs Confluence, but AGENT_TEAM_CONFLUENCE_BASE_URL is not set"
                    )
                try:
                    self._client = self.make_client()
                except ConfigError as exc:
                    raise ConfluenceRefusedError(f"{why} needs Confluence: {exc}") from None
            return self._client

    def clean(self, value: Any) -> Any:
        """`value` under the one redaction rule, as the client applies it to what it sends.

        The lane applies it when it drafts, so the approval question shows exactly
        what will be written (the client's own pass then changes nothing).
        """
        return redact_deep(value, self.secrets)

    def has_client(self) -> bool:
        return self.make_client is not None

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def lane_from_settings(settings: ConfluenceSettings) -> ConfluenceLane | None:
    """The lane for these settings, or None when `AGENT_TEAM_CONFLUENCE_ENABLED` is off."""
    if not settings.enabled:
        return None

    def make() -> ConfluenceClient:
        return ConfluenceClient.from_settings(settings, retry_cap_s=settings.retry_cap_s)

    return ConfluenceLane(
        space_id=settings.space_id,
        parent_id=settings.parent_id,
        dry_run=settings.dry_run,
        macro_keys=settings.mermaid_macros,
        make_client=make if settings.base_url else None,
        secrets=tuple(
            secret.get_secret_value()
            for secret in (settings.api_token, settings.client_secret)
            if secret is not None
        ),
    )
