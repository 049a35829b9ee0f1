"""How questions reach people and notifications reach their threads."""

from __future__ import annotations

from agent_team.transports.base import Transport
from agent_team.transports.local import LocalTransport

__all__ = ["LocalTransport", "Transport"]
