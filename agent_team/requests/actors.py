"""Who asked for a change, and through what: the audit log's `actor` and `via`.

Every request that changes state names its `Actor`: the CLI's operating-system
user (`cli`), a dashboard token's name (`dashboard`), a Slack user id
(`slack`), a GitHub repository (`github`), an automation (`automation`).
Answers already carry this as `answered_via` (`slack:U123`), which
`Actor.from_via` reads back.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_team import db

__all__ = ["INTERNAL", "Actor", "cli_actor"]


@dataclass(frozen=True)
class Actor:
    """`as_person`: the CLI's `--as NAME` (checked with that person's role); the CLI's own
    operating-system user is the local operator, an owner, even if a person shares the name."""

    name: str
    via: str
    as_person: bool = field(default=False, compare=False)

    @classmethod
    def from_via(cls, via: str) -> Actor:
        """From `transport:who` (`slack:U123`, `cli:ada`, `dashboard:ci-bot`)."""
        transport, _, who = via.partition(":")
        return cls(who or transport, transport)

    def entry(
        self, action: str, target: str, detail: Mapping[str, Any] | None = None
    ) -> db.AuditEntry:
        return db.AuditEntry(self.name, self.via, action, target, dict(detail or {}))


# Changes made by code on its own behalf (tests and tools calling `inbox` directly).
INTERNAL = Actor("agent-team", "internal")


def cli_actor() -> Actor:
    """The operating-system user running the CLI."""
    try:
        return Actor(getpass.getuser(), "cli")
    except (KeyError, OSError):  # no passwd entry (a container's bare uid)
        return Actor("unknown", "cli")
