"""The LangGraph server's threads/runs API, so Agent Inbox and the LangGraph SDKs answer our gates.

Off unless `AGENT_TEAM_LANGGRAPH_API=on`; then mounted at `/langgraph`.
"""

from __future__ import annotations

from agent_team.integrations.langgraph_api.integration import LangGraphApiIntegration

__all__ = ["LangGraphApiIntegration"]
