"""Confluence documentation lane: the REST v2 client, ADF helpers and the Mermaid editor.

`lane.ConfluenceLane` is what the graph's nodes get (through
`GraphDeps.confluence`) when `AGENT_TEAM_CONFLUENCE_ENABLED` is on.
"""

from __future__ import annotations

__all__: list[str] = []
