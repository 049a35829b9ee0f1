"""One module per graph node; each node is a plain function of (state, deps)."""

from __future__ import annotations

from agent_team.nodes.common import GraphDeps

__all__ = ["GraphDeps"]
