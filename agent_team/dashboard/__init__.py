"""The HTTP side of the daemon: JSON API, pages, health and metrics."""

from __future__ import annotations

from agent_team.dashboard.app import create_app
from agent_team.dashboard.context import DashboardContext

__all__ = ["DashboardContext", "create_app"]
